"""Write ``ttmodels/data/wormhole_galaxy_mock_cluster.yaml``: a 32-chip Wormhole Galaxy in tt-umd's
cluster-descriptor format, for the mock device (``ttmodels.backends.mock_device``, system
"galaxy").

A Galaxy (board type ``ubb``) holds four trays of eight chips, every chip on PCIe. tt-metal finds
a chip's place from its PCIe bus id: the high nibble names the tray (0xC0, 0x80, 0x00, 0x40 are
trays 1-4 on Wormhole, tt-metal fabric/control_plane.cpp ``ubb_bus_ids``), the low nibble its
position 1-8 in the tray, and it pins the mesh's corners to fixed positions. So the wiring below
is the Galaxy's, by (tray, position), as tt-umd's 6U example shows it:

* in a tray the chips are two rows, 1-2-3-4 over 5-6-7-8: along a row four links (channels
  8-11 to 4-7), down a column four links (12-15 to 0-3);
* between trays: the bottom rows of trays 1 and 3, and of trays 4 and 2, face each other
  (12-15 to 12-15); positions 4 and 8 of trays 1 and 4, and of trays 3 and 2, too (8-11 to 8-11).

One Tensix row per chip is harvested (``harvest_mask`` 32): with ethernet dispatch ttnn 0.81.1's
mock then offers the 8x8 worker grid the Wormhole plans are made for (docs/multichip.md "Mock
systems and real boards").

    python scripts/galaxy_descriptor.py > ttmodels/data/wormhole_galaxy_mock_cluster.yaml
"""
from __future__ import annotations

TRAY_BUS = {1: 0xC0, 2: 0x80, 3: 0x00, 4: 0x40}   # tray -> its PCIe bus ids' high nibble
ROW_PAIRS = ((1, 3), (4, 2))      # trays whose bottom rows (positions 5-8) are joined
END_PAIRS = ((1, 4), (3, 2))      # trays whose positions 4 and 8 are joined


def chip(tray: int, pos: int) -> int:
    return (tray - 1) * 8 + (pos - 1)


def links() -> list[tuple[int, int, int, int]]:
    """(chip, channel, chip, channel) for every ethernet link, four per joined pair."""
    pairs = []          # (chip a, first channel of a, chip b, first channel of b)
    for t in TRAY_BUS:
        for p in (1, 2, 3, 5, 6, 7):
            pairs.append((chip(t, p), 8, chip(t, p + 1), 4))
        for p in (1, 2, 3, 4):
            pairs.append((chip(t, p), 12, chip(t, p + 4), 0))
    for a, b in ROW_PAIRS:
        pairs += [(chip(a, p), 12, chip(b, p), 12) for p in (5, 6, 7, 8)]
    for a, b in END_PAIRS:
        pairs += [(chip(a, p), 8, chip(b, p), 8) for p in (4, 8)]
    return [(a, ca + i, b, cb + i) for a, ca, b, cb in pairs for i in range(4)]


def main() -> None:
    n = 8 * len(TRAY_BUS)
    print("# A 32-chip Wormhole Galaxy (four trays of eight chips) in tt-umd's cluster-descriptor")
    print("# format. Written by scripts/galaxy_descriptor.py (the wiring is explained there).")
    print("arch:")
    for c in range(n):
        print(f"  {c}: wormhole_b0")
    print("chips: {}")
    print("ethernet_connections:")
    for a, ca, b, cb in links():
        print(f"  - [{{chip: {a}, chan: {ca}}}, {{chip: {b}, chan: {cb}}}]")
    print("ethernet_connections_to_remote_devices: []")
    print("chips_with_mmio:")
    for c in range(n):
        print(f"  - {c}: {c}")
    print("harvesting:")
    for c in range(n):
        print(f"  {c}: {{noc_translation: true, harvest_mask: 32}}")
    print("chip_to_bus_id:")
    for t, hi in TRAY_BUS.items():
        for p in range(1, 9):
            print(f'  {chip(t, p)}: "0x{hi | p:04x}"')
    print("boards:")
    print("  - - board_id: 72061240465162240")
    print("    - board_type: ubb")
    print(f"    - chips: [{', '.join(str(c) for c in range(n))}]")


if __name__ == "__main__":
    main()
