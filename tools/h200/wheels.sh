# Sourced by the tools/h200 scripts: installs the wheels carried in .whl/ (pydantic, msgspec and
# what they need; docs/notebook/validation.md, "Running it on the H200") into /tmp/site and puts it and
# the repository on PYTHONPATH.
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "tools/h200/wheels.sh: no wheels in .whl/ (see docs/notebook/validation.md)" >&2; exit 2; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
