"""channel_shuffle runs as the reshape family's layer: its package's ``steps``, in order."""
from ..reshape.layer import Reshape

LAYERS = {"channel_shuffle": Reshape}
