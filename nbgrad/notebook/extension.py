"""Placeholder: the IPython extension is filled in by its owner."""


def load_ipython_extension(ipython):
    pass


def unload_ipython_extension(ipython):
    pass
