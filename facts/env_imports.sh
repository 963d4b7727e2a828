# gpurig's import check of one declared environment (facts.gpurig_repo.EnvImports): where each
# named module resolves when the environment's own python starts in the checkout, as a job
# started there would. POSIX sh; needs readlink, stat and id to tell who may
# run that python, walked as facts/safe_path.sh walks a path (as root: only the one account able to change what it executes, through
# setpriv, in a PID namespace of its own: unshare).
#
# Arguments: CHECKOUT VENV MODULE...  (checked by EnvImports before they reach a command)
# The run's nonce (facts/round_trip.py START), bounded() (BOUNDED), walk()
# (facts/safe_path.sh) and writers() (facts/writers.sh) come before it.
# Output: parts `--gpurig-part-NONCE LABEL`, each followed by its value: python, ran, run_as,
# refused, report.
set -u
set -f
LC_ALL=C
export LC_ALL
CHECKOUT=$1 VENV=$2
shift 2
PYTHON=$VENV/bin/python
MAX_REPORT=1048576 # bytes of the environment's report kept (it prints a few hundred)
IFS='
' # writers() prints one word list per line: split on newlines only

have() { command -v "$1" >/dev/null 2>&1; }
part() { printf '\n--gpurig-part-%s %s\n%s\n' "$gpurig_nonce" "$1" "$2"; }

# Where each named module of a declared environment resolves, printed as JSON by the
# environment's own python started in the checkout (as a job started there would be). Names
# arrive as arguments (gpurig checked them); find_spec locates a top-level module without
# running it. Paths are resolved here, so the checker compares like with like.
IMPORTS_PY='import importlib.util, json, os, site, sys, sysconfig
real = lambda path: os.path.realpath(path or os.getcwd())
sites = list(getattr(site, "getsitepackages", list)())
if site.ENABLE_USER_SITE:
    sites.append(site.getusersitepackages())
paths = sysconfig.get_paths()
modules = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:
        modules[name] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    if spec is None:
        modules[name] = None
        continue
    located = spec.has_location and spec.origin
    modules[name] = {"origin": real(spec.origin) if located else None,
                     "locations": [real(p) for p in spec.submodule_search_locations or []]}
print(json.dumps({"python": sys.version.split()[0], "site": [real(p) for p in sites],
                  "stdlib": sorted({real(paths["stdlib"]), real(paths["platstdlib"])}),
                  "modules": modules}))'

# Who may run an environment's python: one account able to change all it executes (the
# checkout, first on sys.path; the environment; the interpreter). This login when that is
# root or itself; as root, the one other owner (setpriv drops to it); otherwise nobody: it
# is not run, so a file another account planted never runs as root. Sets RUN_AS and REFUSED.
import_runner() {
  RUN_AS='' REFUSED='' others='' count=0
  me=$(id -u 2>/dev/null) || { REFUSED='no id to tell who this login is'; return; }
  for w in $(writers "$1"; writers "$2"; writers "$3"); do
    case $w in
      "refused "*) REFUSED=${w#refused }; return ;;
      0 | "$me") ;;
      *) case " $others " in *" $w "*) ;; *) others="$others $w" count=$((count + 1)) ;; esac ;;
    esac
  done
  others=${others# }
  if [ "$count" = 0 ]; then
    # Root's alone: run from the walked checkout, the python by its walked name (a venv's
    # python finds its environment by the name it is run by), so no link is re-read.
    walk "$3" && RUN_PY=$HELD && walk "$1" && RUN_IN=$CHECKED || return
    # What that python loads at start-up lies in the environment's tree (a .pth in its
    # site-packages runs, pyvenv.cfg names its home): as root, every directory there and every
    # file python loads (.py, .pyc, .pth, .so, .cfg) is root's and no group or other account
    # may write it, or it does not run at all. (uv's own .lock, say, is nothing python loads.)
    [ "$me" = 0 ] || return
    found=$(find -H "$2" -xdev \( -type d -o -name '*.py' -o -name '*.pyc' -o -name '*.pth' \
      -o -name '*.so' -o -name '*.cfg' \) \( ! -uid 0 -o \( ! -type l -perm /022 \) \) \
      -print -quit 2>/dev/null) || { REFUSED="could not list $2 to tell who can change it"; return; }
    [ -z "$found" ] || REFUSED="$found, which root's python would load, is not root's alone"
    return
  fi
  if [ "$count" -gt 1 ]; then REFUSED="owned by several accounts (uids $others)"; return; fi
  if [ "$me" != 0 ]; then REFUSED="owned by uid $others, not by this login"; return; fi
  have setpriv || { REFUSED="owned by uid $others and no setpriv to run it as that account"; return; }
  # Its code may start children (a .pth runs at start-up) that setsid() out of timeout's reach
  # and hold the read's pipe: it runs as the first process of its own PID namespace, whose
  # end (its exit, or timeout's kill) kills every process left in it.
  unshare --pid --fork --kill-child true 2>/dev/null </dev/null ||
    { REFUSED="owned by uid $others and no PID namespace (unshare) to contain it"; return; }
  RUN_AS=$others
}

out='' RUN_AS='' REFUSED='' ran=no RUN_PY=$PYTHON RUN_IN=$CHECKOUT
if [ -x "$PYTHON" ] && [ -d "$CHECKOUT" ]; then
  import_runner "$CHECKOUT" "$VENV" "$PYTHON"
  if [ -n "$REFUSED" ]; then :
  elif [ -n "$RUN_AS" ]; then
    gid=$(id -g "$RUN_AS" 2>/dev/null) || REFUSED="uid $RUN_AS has no account"
    # Root neither enters nor resolves the account's paths: the account does, as itself.
    # The account alone (facts/as_account.sh, its text in AS_ACCOUNT_SH).
    [ -z "$REFUSED" ] && out=$(cd / && bounded unshare --pid --fork --kill-child \
      /bin/sh -c "$AS_ACCOUNT_SH"'
as_account "$@"' sh "$RUN_AS" "$gid" --clear-groups \
      /bin/sh -c 'cd -- "$1" && shift && exec "$@"' sh "$CHECKOUT" \
      "$PYTHON" -c "$IMPORTS_PY" "$@" </dev/null | head -c "$MAX_REPORT")
  else
    # -E -s: no PYTHON* variable and no user site (a caller's PYTHONWARNINGS imported a
    # module that ran BROWSER).
    out=$(cd "$RUN_IN" && bounded "$RUN_PY" -E -s -c "$IMPORTS_PY" "$@" 2>/dev/null </dev/null |
      head -c "$MAX_REPORT")
  fi
  [ -z "$REFUSED" ] && ran=yes
fi
part python "$PYTHON"
part ran "$ran"
part run_as "$RUN_AS"
part refused "$REFUSED"
part report "$out"
exit 0
