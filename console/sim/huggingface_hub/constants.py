"""The simulated hub's constants: HF_HUB_CACHE is the simulated node's cache (as the real one's is
HF_HUB_CACHE, else HF_HOME/hub)."""


def __getattr__(name):  # computed on use: the simulated node's folder is made on first use
    if name == "HF_HUB_CACHE":
        from . import default_dir

        return default_dir()
    raise AttributeError(name)
