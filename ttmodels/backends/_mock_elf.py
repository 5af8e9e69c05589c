"""Link step of the mock toolchain (``ttmodels.backends.mock_device``): write a minimal RISC-V ELF32.

Run as a script by the stand-in ``riscv-tt-elf-g++``: ``python _mock_elf.py OUT [FIRMWARE_ELF]``.
tt-metal loads a kernel/firmware ELF to read its segments and symbols (and XIP-ifies kernels,
which wants a ``.rela.text`` section); it never executes it on a mock cluster. The ELF has one
4-instruction ``.text`` (nops and a return), a 4-byte ``.data``, ``_start`` and
``__kernel_data_lma`` symbols and an empty ``.rela.text``, every section 4-byte aligned. Kernels
are placed where the firmware says kernel text starts (its ``__fw_export_*`` symbols, read from
the ``--just-symbols`` firmware ELF), as a real link would.

Standalone on purpose (no ttmodels imports): it runs once per link step in a fresh interpreter.
"""
import struct
import sys

EM_RISCV = 243
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 1, 2, 3, 4
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_INFO_LINK = 0x1, 0x2, 0x4, 0x40
PT_LOAD = 1
DEFAULT_TEXT, DEFAULT_DATA = 0x6000, 0xFFB00800


def firmware_symbols(path: str) -> dict[str, int]:
    """Symbol name -> value of a little-endian ELF32 (empty if it is not one)."""
    try:
        with open(path, "rb") as f:
            b = f.read()
    except OSError:
        return {}
    if b[:4] != b"\x7fELF" or b[4] != 1:
        return {}
    shoff, = struct.unpack_from("<I", b, 0x20)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x2E)
    sections = [struct.unpack_from("<10I", b, shoff + i * shentsize) for i in range(shnum)]
    out = {}
    for sh in sections:
        if sh[1] != SHT_SYMTAB:
            continue
        strtab = sections[sh[6]]
        for off in range(sh[4], sh[4] + sh[5], 16):
            name_off, value = struct.unpack_from("<II", b, off)
            start = strtab[4] + name_off
            out[b[start:b.index(b"\0", start)].decode(errors="replace")] = value
    return out


def _align4(n: int) -> int:
    return (n + 3) & ~3


def elf_bytes(text_addr: int, data_addr: int) -> bytes:
    text = struct.pack("<4I", 0x00000013, 0x00000013, 0x00000013, 0x00008067)  # nop x3, ret
    data = struct.pack("<I", 0)
    names = [".text", ".data", ".symtab", ".strtab", ".shstrtab", ".rela.text"]
    shstr = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    name_at = {n: shstr.index(n.encode() + b"\0") for n in names}
    strtab = b"\0_start\0__kernel_data_lma\0"
    # st_name, st_value, st_size, st_info, st_other, st_shndx
    symbols = [(0, 0, 0, 0, 0, 0),
               (strtab.index(b"_start"), text_addr, 0, 0x12, 0, 1),            # GLOBAL FUNC
               (strtab.index(b"__kernel_data_lma"), text_addr + len(text), 0, 0x10, 0, 0xFFF1)]
    symtab = b"".join(struct.pack("<IIIBBH", *s) for s in symbols)

    ehsize, phentsize, phnum, shentsize = 52, 32, 2, 40
    layout, off = {}, ehsize + phentsize * phnum
    for key, blob in (("text", text), ("data", data), ("symtab", symtab), ("strtab", strtab),
                      ("shstr", shstr)):
        off = _align4(off)
        layout[key] = off
        off += len(blob)
    rela_off = shoff = _align4(off)          # the empty .rela.text sits where headers start
    sections = [
        (0,) * 10,
        (name_at[".text"], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_addr, layout["text"],
         len(text), 0, 0, 4, 0),
        (name_at[".data"], SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, data_addr, layout["data"],
         len(data), 0, 0, 4, 0),
        (name_at[".symtab"], SHT_SYMTAB, 0, 0, layout["symtab"], len(symtab), 4, 1, 4, 16),
        (name_at[".strtab"], SHT_STRTAB, 0, 0, layout["strtab"], len(strtab), 0, 0, 1, 0),
        (name_at[".shstrtab"], SHT_STRTAB, 0, 0, layout["shstr"], len(shstr), 0, 0, 1, 0),
        (name_at[".rela.text"], SHT_RELA, SHF_INFO_LINK, 0, rela_off, 0, 3, 1, 4, 12),
    ]
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)     # ELF32, little endian, SYSV
    header = ident + struct.pack("<HHIIIIIHHHHHH", 2, EM_RISCV, 1, text_addr, ehsize, shoff, 0,
                                 ehsize, phentsize, phnum, shentsize, len(sections),
                                 names.index(".shstrtab") + 1)
    # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align
    phdrs = struct.pack("<8I", PT_LOAD, layout["text"], text_addr, text_addr, len(text),
                        len(text), 5, 4)
    phdrs += struct.pack("<8I", PT_LOAD, layout["data"], data_addr, text_addr + len(text),
                         len(data), len(data), 6, 4)
    body = bytearray(header + phdrs)
    for key, blob in (("text", text), ("data", data), ("symtab", symtab), ("strtab", strtab),
                      ("shstr", shstr)):
        body += bytes(layout[key] - len(body)) + blob
    body += bytes(shoff - len(body))
    body += b"".join(struct.pack("<10I", *s) for s in sections)
    return bytes(body)


def main(argv: list[str]) -> int:
    out = argv[1]
    syms = firmware_symbols(argv[2]) if len(argv) > 2 and argv[2] else {}
    with open(out, "wb") as f:
        f.write(elf_bytes(syms.get("__fw_export_text_end", DEFAULT_TEXT),
                          syms.get("__fw_export_ldm_end", DEFAULT_DATA)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
