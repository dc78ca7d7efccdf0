"""Lightning modules, callbacks and the fit orchestration (the only layer that imports Lightning)."""

import warnings

# lightning 2.6 on torch 2.13 warns about a deprecated pytree call at import; nothing to act on
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
