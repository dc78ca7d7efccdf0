# One-command setup on a bare CPU machine with Python 3.11: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# torch is installed first and pinned by a constraint file, so no later install swaps it for a
# multi-GB CUDA build; the package itself only asks for torch>=2.4 (GPU users keep theirs).
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup demo test bench clean gpu-wheels gpu-check meshes capture-scene

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@# open3d's wheel links libusb-1.0, which bare Debian/Ubuntu images lack
	@ldconfig -p | grep -q 'libusb-1.0.so.0' || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q libusb-1.0-0; }
	@# the native CPU kernels (inr/native) and torch.compile on CPU compile C++ with OpenMP
	@command -v g++ >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q g++; }
	@# the viewer's tests open the page in a real headless browser (playwright drives Debian's chromium)
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PY) -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > $(VENV)/constraints.txt
	PIP_CONSTRAINT=$(VENV)/constraints.txt $(PIP) install -q -e ".[test,open3d,captures,las,e57]"
	touch $(STAMP)

demo: setup
	$(VENV)/bin/inr fit-image --time-budget 60 --out runs/demo-image --overwrite
	$(VENV)/bin/inr fit-audio --time-budget 60 --out runs/demo-audio --overwrite
	@echo "outputs: runs/demo-image (reconstruction.png, error.png, curve.png, metrics.json)"
	@echo "         runs/demo-audio (reconstruction.wav, audio.png, curve.png, metrics.json)"

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) scripts/bench_speed.py
	$(PY) scripts/bench_quality.py

# real meshes from CGAL's data set, which Debian ships in libcgal-demo (downloaded, not installed:
# only its data archive is read): data/heldout-meshes for scripts/bench_surface.py (never trained
# on), data/training-meshes for `inr pointcloud train --meshes` (see assets/README.md)
HELDOUT_MESHES  := armadillo bunny00 camel cow elk fandisk diplodocus mushroom lion boeing man triceratops b9_mesh mask_cone mech-holes-shark
TRAINING_MESHES := bull bear pig homer hand femur dino elephant knot1 rotor turbine pinion anchor helmet cactus joint \
                   retinal couplingdown dragknob eight head mannequin-devil nefertiti blade ChineseDragon-10kv horizons \
                   three_peaks cheese
CGAL_DATA := data/.cgal-data.tar.gz
$(CGAL_DATA):
	@mkdir -p data/pkg
	cd data && apt-get download -q libcgal-demo && dpkg -x libcgal-demo_*.deb pkg && \
	  mv pkg/usr/share/doc/libcgal-dev/data.tar.gz .cgal-data.tar.gz && rm -rf pkg libcgal-demo_*.deb
meshes: $(CGAL_DATA)
	mkdir -p data/heldout-meshes data/training-meshes
	tar xzf $(CGAL_DATA) -C data/heldout-meshes --strip-components=2 $(foreach m,$(HELDOUT_MESHES),data/meshes/$(m).off)
	tar xzf $(CGAL_DATA) -C data/training-meshes --strip-components=2 $(foreach m,$(TRAINING_MESHES),data/meshes/$(m).off)

# the held-out unbounded capture for scripts/bench_unbounded.py: path traced by Mitsuba 3 (a PyPI
# wheel, CPU variant scalar_rgb; installed here only, the package does not need it), ~12 minutes
capture-scene: setup
	$(PIP) install -q "mitsuba==3.9.1"
	test -f data/heldout-capture/truth.json || $(PY) scripts/make_capture_scene.py data/heldout-capture

# wheels the offline GPU machine lacks (its Python is 3.12): `make gpu-wheels` here, then carry
# gpu-wheels/ there and run `make gpu-check` (or bash scripts/gpu_check.sh)
gpu-wheels:
	$(PIP) download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
	  --platform manylinux_2_28_x86_64 -d gpu-wheels nerfacc trimesh soundfile cffi pycparser
	@# imageio-ffmpeg (68 MB) does not fit the 64 MiB that travels: videos are written as GIF there

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) runs .pytest_cache
