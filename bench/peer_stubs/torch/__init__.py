# Import-time stand-in (bench/peers.py): xgrammar imports torch and
# transformers at import time only; the CPU paths used here take NumPy arrays
# through DLPack and a raw token list.
class _Any(type):
    def __getattr__(cls, name):
        return _make(name)
def _make(name):
    def init(self, *a, **k):
        pass
    def getattr_(self, name):
        return _make(name)
    return _Any(name, (), {"__init__": init, "__getattr__": getattr_, "__call__": lambda s, *a, **k: s})
def __getattr__(name):
    return _make(name)
