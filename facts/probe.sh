# gpurig probe: what `gpurig drift` and onboarding check but the converge does not manage
# (host, cgroup, headroom, login shells, engine API, GPUs, torch in containers), as one JSON
# document on stdout; it runs inside the host's one round trip (facts/gpurig_host.py). POSIX sh; needs only sh, cat and sed. Every other tool is optional and
# behind `command -v`: what is missing is reported as null/false, never as a failure.
# Raw tool outputs are embedded as JSON strings; facts/probe.py parses them.
#
# Run by hand:  sh facts/probe.sh [--engine docker|podman] [--path DIR]... [--container NAME]...
#   [--gpu-fields index,name,...] [--imports 'CHECKOUT<TAB>VENV<TAB>module module...']...
#   [--bound SECONDS]
set -u
LC_ALL=C
export LC_ALL
NL='
'
TAB=$(printf '\t')
set -f # lists below are split on newlines, never globbed

ENGINE='' PATHS='/' CONTAINERS='' GPU_FIELDS='' IMPORTS='' BOUND=20
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { printf 'probe: %s needs a value\n' "$1" >&2; exit 2; }
  case $1 in
    --engine) ENGINE=$2 ;;
    --path) PATHS="$PATHS$NL$2" ;;
    --container) CONTAINERS="$CONTAINERS$NL$2" ;;
    --gpu-fields) GPU_FIELDS=$2 ;;
    --imports) IMPORTS="$IMPORTS$NL$2" ;;
    --bound) case $2 in '' | *[!0-9]*) printf 'probe: --bound takes whole seconds\n' >&2; exit 2 ;; esac
      BOUND=$2 ;;
    *) printf 'probe: unknown argument %s\n' "$1" >&2; exit 2 ;;
  esac
  shift 2
done

have() { command -v "$1" >/dev/null 2>&1; }
# Bound every call that can hang (a wedged engine, a stuck GPU) when coreutils' timeout exists:
# 20 s each, or what a node contract's mode allows (--bound).
bounded() { if have timeout; then timeout "$BOUND" "$@"; else "$@"; fi; }

# One sed program escapes a string for JSON: backslash, quote, every control character.
JSON_SED=':a;$!N;$!ba;s/\\/\\\\/g;s/"/\\"/g'
for code in 1 2 3 4 5 6 7 8 9 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31; do
  char=$(printf "\\$(printf '%03o' "$code")")
  JSON_SED="$JSON_SED;s/$char/\\\\u00$(printf '%02x' "$code")/g"
done
JSON_SED="$JSON_SED;s/\\n/\\\\n/g"

json_str() { printf '"'; printf '%s' "$1" | sed -e "$JSON_SED"; printf '"'; }
json_str_or_null() { if [ -n "$1" ]; then json_str "$1"; else printf null; fi; }
json_num() {
  case $1 in '' | - | *[!0-9-]* | ?*-*) printf null ;; *) printf '%s' "$1" ;; esac
}
json_bool() { if "$@"; then printf true; else printf false; fi; }

# The document is streamed; SEP is the separator the next member needs at the current level.
SEP=''
member() { printf '%s"%s":' "$SEP" "$1"; SEP=','; }
open_obj() { [ $# -gt 0 ] && member "$1"; printf '{'; SEP=''; }
open_arr() { [ $# -gt 0 ] && member "$1"; printf '['; SEP=''; }
item() { printf '%s' "$SEP"; SEP=','; }
close_obj() { printf '}'; SEP=','; }
close_arr() { printf ']'; SEP=','; }
kv_str() { member "$1"; json_str_or_null "$2"; }
kv_num() { member "$1"; json_num "$2"; }

read_file() { [ -r "$1" ] && cat "$1" 2>/dev/null; }
first_line() { printf '%s\n' "$1" | sed -n '1p'; }
os_release() {
  sed -n "/^$1=/{s/^$1=//;s/^[\"']//;s/[\"']\$//;p;q;}" /etc/os-release 2>/dev/null
}

section_host() {
  open_obj host
  kv_str hostname "$(read_file /proc/sys/kernel/hostname)"
  kv_str kernel "$(read_file /proc/sys/kernel/osrelease)"
  kv_str os_id "$(os_release ID)"
  kv_str os_version "$(os_release VERSION_ID)"
  kv_str os_pretty "$(os_release PRETTY_NAME)"
  uid=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status 2>/dev/null)
  kv_num uid "$uid"
  name=''
  have id && name=$(id -un 2>/dev/null)
  kv_str user "$name"
  mem=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB$/\1/p' /proc/meminfo 2>/dev/null)
  kv_num memory_bytes "${mem:+$((mem * 1024))}"
  # Can this login become root without a password? null: no sudo to ask (or already root).
  member sudo
  if [ "$uid" != 0 ] && [ -z "${GPURIG_NO_SUDO-}" ] && have sudo; then json_bool bounded sudo -n true </dev/null 2>/dev/null
  else printf null; fi
  close_obj
}

# oom_kill from a cgroup's memory events, given its path under the mount: memory.events on v2
# (counts the cgroup and its descendants), memory.oom_control on v1.
oom_kill_at() {
  if [ "$CGROUP_V2" = 1 ]; then sed -n 's/^oom_kill //p' "/sys/fs/cgroup$1/memory.events" 2>/dev/null
  else sed -n 's/^oom_kill //p' "/sys/fs/cgroup/memory$1/memory.oom_control" 2>/dev/null; fi
}

# The memory cgroup of process $1, from /proc/PID/cgroup: `0::PATH` on v2, the line naming
# the memory controller on v1.
memory_cgroup_of() {
  case $1 in '' | 0 | *[!0-9]*) return ;; esac
  if [ "$CGROUP_V2" = 1 ]; then sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null
  else sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' "/proc/$1/cgroup" 2>/dev/null; fi
}

CGROUP_V2=0
[ -r /sys/fs/cgroup/cgroup.controllers ] && CGROUP_V2=1

section_cgroup() {
  open_obj cgroup
  if [ "$CGROUP_V2" = 1 ]; then
    kv_num version 2
    kv_str memory_limit "$(read_file /sys/fs/cgroup/memory.max)"
    kv_str memory_usage "$(read_file /sys/fs/cgroup/memory.current)"
    kv_str oom_kill "$(oom_kill_at '')"
    kv_str cpu_max "$(read_file /sys/fs/cgroup/cpu.max)"
    kv_str stat "$(read_file /sys/fs/cgroup/cgroup.stat)"
    kv_str percpu "$(sed -n 's/^percpu //p' /sys/fs/cgroup/memory.stat 2>/dev/null)"
  elif [ -d /sys/fs/cgroup/memory ]; then
    kv_num version 1
    kv_str memory_limit "$(read_file /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    kv_str memory_usage "$(read_file /sys/fs/cgroup/memory/memory.usage_in_bytes)"
    kv_str oom_kill "$(oom_kill_at '')"
    quota=$(read_file /sys/fs/cgroup/cpu/cpu.cfs_quota_us)
    period=$(read_file /sys/fs/cgroup/cpu/cpu.cfs_period_us)
    kv_str cpu_max "${quota:+$quota $period}"
  else
    kv_num version ''
  fi
  # Cgroup counts per hierarchy (v1; on v2 every controller prints the one tree's count) and
  # the kernel's per-cpu memory, for leak checks on any cgroup version.
  kv_str proc_cgroups "$(read_file /proc/cgroups)"
  kv_str meminfo_percpu "$(sed -n 's/^Percpu:[[:space:]]*//p' /proc/meminfo 2>/dev/null)"
  close_obj
}

# df -P: the last line holds the columns (sizes in 1K blocks, or inodes with -i); lists are
# split on newlines, so df's columns are split on blanks here.
df_fields() { have df && df -P "$@" 2>/dev/null | sed -n '$p' | sed "s/[ $TAB][ $TAB]*/\\$NL/g"; }
disk_entry() {
  item; open_obj
  kv_str path "$1"
  member exists; json_bool [ -e "$1" ]
  # shellcheck disable=SC2046  # word splitting of df's columns is the point
  set -- "$1" $(df_fields -k -- "$1")
  kv_str mount "${7-}"
  if [ $# -ge 5 ]; then kv_num total_bytes "$(($3 * 1024))"; kv_num free_bytes "$(($5 * 1024))"
  else kv_num total_bytes ''; kv_num free_bytes ''; fi
  # shellcheck disable=SC2046
  set -- "$1" $(df_fields -i -- "$1")
  if [ $# -ge 5 ]; then kv_num inodes_total "$3"; kv_num inodes_free "$5"
  else kv_num inodes_total ''; kv_num inodes_free ''; fi
  close_obj
}

section_disks() {
  open_arr disks
  for path in $PATHS; do disk_entry "$path"; done
  close_arr
}

section_core_dumps() {
  open_obj core_dumps
  kv_str ulimit_c "$(ulimit -c 2>/dev/null)"
  # A login shell reads /etc/profile and profile.d, as an SSH session or `bash -l` would.
  if have bash; then login=bash; else login=sh; fi
  out=$(bounded "$login" -lc 'ulimit -c; printf "%s\n" "${DOCKER_HOST-}"' </dev/null 2>/dev/null)
  kv_str login_shell "$login"
  kv_str login_ulimit_c "$(first_line "$out")"
  LOGIN_DOCKER_HOST=$(printf '%s\n' "$out" | sed -n '2p')
  kv_str core_pattern "$(read_file /proc/sys/kernel/core_pattern)"
  close_obj
}

# Does an engine API socket answer _ping? null when it cannot be asked (no socket, no curl).
socket_entry() {
  open_obj "$1"
  kv_str path "$2"
  member exists; json_bool [ -S "$2" ]
  member answers
  if [ -S "$2" ] && have curl; then
    json_bool [ "$(bounded curl -s --max-time 5 --unix-socket "$2" http://d/_ping)" = OK ]
  else
    printf null
  fi
  close_obj
}

section_engine() {
  open_obj engine
  open_obj installed
  for tool in docker podman; do
    member "$tool"
    if have "$tool"; then json_str "$(first_line "$(bounded "$tool" --version 2>/dev/null)")"
    else printf null; fi
  done
  close_obj
  socket_entry podman_socket /run/podman/podman.sock
  socket_entry docker_socket /var/run/docker.sock
  kv_str login_docker_host "$LOGIN_DOCKER_HOST"
  close_obj
}

# torch inside a running container, printed as JSON by the container's own python3.
TORCH_PY='import json
try:
    import torch
except Exception:
    print(json.dumps(None))
else:
    print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                      "arch_list": torch.cuda.get_arch_list()}))'

section_containers() {
  cli=$ENGINE
  if [ -z "$cli" ] || [ "$cli" = none ]; then
    if have docker; then cli=docker; elif have podman; then cli=podman; else cli=''; fi
  fi
  open_arr containers
  for name in $CONTAINERS; do
    item; open_obj; kv_str name "$name"
    running='' torch='' oom=''
    if [ -n "$cli" ] && have "$cli"; then
      state=$(bounded "$cli" inspect --type container --format '{{.State.Running}} {{.State.Pid}}' -- "$name" 2>/dev/null)
      running=${state%% *}
      if [ "$running" = true ]; then
        torch=$(bounded "$cli" exec "$name" python3 -c "$TORCH_PY" 2>/dev/null </dev/null)
        path=$(memory_cgroup_of "${state#* }")
        [ -n "$path" ] && oom=$(oom_kill_at "$path")
      fi
    fi
    kv_str engine "$cli"
    kv_str torch "$torch"
    kv_str oom_kill "$oom"
    close_obj
  done
  close_arr
}

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

# Who can change a path: the owner of it and of every directory above it, one uid a line, or
# "shared PATH" where a group or other users may write (or "unknown PATH" without stat).
writers() {
  p=$(readlink -f -- "$1" 2>/dev/null) || { printf 'unknown %s\n' "$1"; return; }
  while :; do
    info=$(stat -c '%u %a' -- "$p" 2>/dev/null) || { printf 'unknown %s\n' "$p"; return; }
    case ${info#* } in *[2367]? | *[2367]) printf 'shared %s\n' "$p"; return ;; esac
    printf '%s\n' "${info%% *}"
    [ "$p" = / ] && return
    p=${p%/*}
    [ -n "$p" ] || p=/
  done
}

# Who may run an environment's python: one account able to change all it executes (the
# checkout, first on sys.path; the environment; the interpreter). This login when that is
# root or itself; as root, the one other owner (setpriv drops to it); otherwise nobody: it
# is not run, so a file another account planted never runs as root. Sets RUN_AS and REFUSED.
import_runner() {
  RUN_AS='' REFUSED='' others='' count=0
  me=$(id -u 2>/dev/null) || { REFUSED='no id to tell who this login is'; return; }
  for w in $(writers "$1"; writers "$2"; writers "$3"); do
    case $w in
      "shared "*) REFUSED="other accounts may write ${w#shared }"; return ;;
      "unknown "*) REFUSED="cannot tell who may change ${w#unknown } (no readlink or stat)"; return ;;
      0 | "$me") ;;
      *) case " $others " in *" $w "*) ;; *) others="$others $w" count=$((count + 1)) ;; esac ;;
    esac
  done
  others=${others# }
  if [ "$count" = 0 ]; then return; fi
  if [ "$count" -gt 1 ]; then REFUSED="owned by several accounts (uids $others)"; return; fi
  if [ "$me" != 0 ]; then REFUSED="owned by uid $others, not by this login"; return; fi
  have setpriv || { REFUSED="owned by uid $others and no setpriv to run it as that account"; return; }
  RUN_AS=$others
}

section_imports() {
  open_arr imports
  for record in $IMPORTS; do
    checkout=${record%%"$TAB"*}
    rest=${record#*"$TAB"}
    venv=${rest%%"$TAB"*}
    python=$venv/bin/python
    modules=${rest#*"$TAB"}
    item; open_obj
    kv_str checkout "$checkout"
    kv_str python "$python"
    out='' RUN_AS='' REFUSED=''
    if [ -x "$python" ] && [ -d "$checkout" ]; then
      import_runner "$checkout" "$venv" "$python"
      # shellcheck disable=SC2086  # the names are split on blanks (never globbed: set -f)
      if [ -n "$REFUSED" ]; then :
      elif [ -n "$RUN_AS" ]; then
        gid=$(id -g "$RUN_AS" 2>/dev/null) || REFUSED="uid $RUN_AS has no account"
        [ -z "$REFUSED" ] && out=$(cd "$checkout" && IFS=' ' && bounded setpriv --reuid="$RUN_AS" \
          --regid="$gid" --clear-groups --reset-env "$python" -c "$IMPORTS_PY" $modules 2>/dev/null </dev/null)
      else
        out=$(cd "$checkout" && IFS=' ' && bounded "$python" -c "$IMPORTS_PY" $modules 2>/dev/null </dev/null)
      fi
      member ran; json_bool [ -z "$REFUSED" ]
    else
      member ran; printf false
    fi
    kv_str run_as "$RUN_AS"
    kv_str refused "$REFUSED"
    kv_str report "$out"
    close_obj
  done
  close_arr
}

section_gpu() {
  open_obj gpu
  member nvidia_smi; json_bool have nvidia-smi
  kv_str proc_version "$(read_file /proc/driver/nvidia/version)"
  query='' apps='' xml='' nvlink='' listing=''
  if have nvidia-smi; then
    [ -n "$GPU_FIELDS" ] &&
      query=$(bounded nvidia-smi --query-gpu="$GPU_FIELDS" --format=csv,noheader,nounits 2>&1)
    # GPUs with their MIG devices (profile and UUID): only -L names the slices.
    listing=$(bounded nvidia-smi -L 2>&1)
    apps=$(bounded nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits 2>&1)
    xml=$(bounded nvidia-smi -q -x 2>/dev/null)
    nvlink=$(bounded nvidia-smi nvlink -s 2>/dev/null)
  fi
  kv_str query "$query"
  kv_str compute_apps "$apps"
  kv_str smi_xml "$xml"
  kv_str nvlink "$nvlink"
  kv_str listing "$listing"
  # Device nodes CUDA needs (nvidia-uvm is created on first use by nvidia-modprobe) and the
  # NVSwitches that make fabric manager mandatory.
  member uvm_device; json_bool [ -c /dev/nvidia-uvm ]
  nvswitch=0
  set +f
  for dev in /dev/nvidia-nvswitch[0-9]*; do [ -c "$dev" ] && nvswitch=$((nvswitch + 1)); done
  set -f
  kv_num nvswitch_devices "$nvswitch"
  fm=''
  have systemctl && fm=$(bounded systemctl is-active nvidia-fabricmanager 2>/dev/null)
  kv_str fabricmanager "$fm"
  # A driver upgraded under a running kernel: the reboot flag, DKMS and the module on disk.
  member reboot_required; json_bool [ -f /var/run/reboot-required ]
  kv_str reboot_required_pkgs "$(read_file /var/run/reboot-required.pkgs)"
  dkms=''
  have dkms && dkms=$(bounded dkms status 2>/dev/null)
  kv_str dkms "$dkms"
  member modinfo; json_bool have modinfo
  built=''
  have modinfo && built=$(modinfo -F version nvidia 2>/dev/null)
  kv_str module_built "$built"
  cli=''
  have nvidia-container-cli && cli=$(bounded nvidia-container-cli info 2>&1)
  kv_str container_cli "$cli"
  # Kernel log since boot: dmesg may be restricted to root, journalctl -k -b is the fallback.
  xid='' source=''
  if have dmesg && log=$(dmesg 2>/dev/null); then
    source=dmesg
  elif have journalctl && log=$(bounded journalctl -k -b --no-pager -q 2>/dev/null); then
    source=journalctl
  else
    log=''
  fi
  # Xid lines, and the 'fallen off the bus' messages drivers also log without an Xid number
  # (the multi-line form names the GPU on its 'The NVIDIA GPU' line).
  [ -n "$source" ] && xid=$(printf '%s\n' "$log" | sed -n -e '/NVRM: Xid/{p;d;}' \
    -e '/fallen off the bus/{p;d;}' -e '/NVRM: The NVIDIA GPU/{p;d;}')
  kv_str kernel_log "$source"
  kv_str xid_lines "$xid"
  close_obj
}

IFS=$NL
printf '{'
kv_num probe_version 1
section_host
section_cgroup
section_disks
section_core_dumps
section_engine
section_containers
section_imports
section_gpu
printf '}\n'
exit 0
