# gpurig probe: everything `gpurig drift` reads from a host, in one round trip, as one JSON
# document on stdout. POSIX sh; needs only sh, cat and sed. Every other tool is optional and
# behind `command -v`: what is missing is reported as null/false, never as a failure.
# Raw tool outputs are embedded as JSON strings; facts/probe.py parses them.
#
# Run by hand:  sh facts/probe.sh [--engine docker|podman] [--path DIR]... [--core-dir DIR]...
#   [--hash-file FILE]... [--container NAME]... [--repo DIR [--lockfile NAME [--venv DIR]]]...
#   [--package NAME]... [--gpu-fields index,name,...]
set -u
LC_ALL=C
export LC_ALL
NL='
'
TAB=$(printf '\t')
set -f # lists below are split on newlines, never globbed

ENGINE='' PATHS='/' CORE_DIRS='' HASH_FILES='' CONTAINERS='' REPOS='' PACKAGES='' GPU_FIELDS=''
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { printf 'probe: %s needs a value\n' "$1" >&2; exit 2; }
  case $1 in
    --engine) ENGINE=$2 ;;
    --path) PATHS="$PATHS$NL$2" ;;
    --core-dir) CORE_DIRS="$CORE_DIRS$NL$2" ;;
    --hash-file) HASH_FILES="$HASH_FILES$NL$2" ;;
    --container) CONTAINERS="$CONTAINERS$NL$2" ;;
    --repo) REPOS="$REPOS$NL$2$TAB" ;;
    --lockfile | --venv) REPOS="$REPOS$2$TAB" ;;
    --package) PACKAGES="$PACKAGES$NL$2" ;;
    --gpu-fields) GPU_FIELDS=$2 ;;
    *) printf 'probe: unknown argument %s\n' "$1" >&2; exit 2 ;;
  esac
  shift 2
done

have() { command -v "$1" >/dev/null 2>&1; }
# git_changes: sent ahead of this script by facts/probe.py; read from beside it when run by hand.
have git_changes || . "${0%/*}/git_changes.sh"
# Bound every call that can hang (a wedged engine, a stuck GPU) when coreutils' timeout exists.
bounded() { if have timeout; then timeout 20 "$@"; else "$@"; fi; }

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
  # Can this login become root without a password? null: no sudo to ask (or already root).
  member sudo
  if [ "$uid" != 0 ] && have sudo; then json_bool bounded sudo -n true </dev/null 2>/dev/null
  else printf null; fi
  close_obj
}

section_cgroup() {
  open_obj cgroup
  if [ -r /sys/fs/cgroup/cgroup.controllers ]; then
    kv_num version 2
    kv_str memory_limit "$(read_file /sys/fs/cgroup/memory.max)"
    kv_str memory_usage "$(read_file /sys/fs/cgroup/memory.current)"
    kv_str oom_kill "$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events 2>/dev/null)"
    kv_str cpu_max "$(read_file /sys/fs/cgroup/cpu.max)"
  elif [ -d /sys/fs/cgroup/memory ]; then
    kv_num version 1
    kv_str memory_limit "$(read_file /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    kv_str memory_usage "$(read_file /sys/fs/cgroup/memory/memory.usage_in_bytes)"
    kv_str oom_kill "$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null)"
    quota=$(read_file /sys/fs/cgroup/cpu/cpu.cfs_quota_us)
    period=$(read_file /sys/fs/cgroup/cpu/cpu.cfs_period_us)
    kv_str cpu_max "${quota:+$quota $period}"
  else
    kv_num version ''
  fi
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
  open_obj shm
  # shellcheck disable=SC2046
  set -- $(df_fields -k /dev/shm)
  member exists; json_bool [ -d /dev/shm ]
  if [ $# -ge 4 ]; then kv_num size_bytes "$(($2 * 1024))"; else kv_num size_bytes ''; fi
  close_obj
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
  open_arr core_files
  for dir in $CORE_DIRS; do
    count=0
    set +f
    for file in "$dir"/core "$dir"/core.*; do [ -f "$file" ] && count=$((count + 1)); done
    set -f
    item; open_obj; kv_str dir "$dir"; member exists; json_bool [ -d "$dir" ]
    kv_num count "$count"; close_obj
  done
  close_arr
  close_obj
}

sha256() { have sha256sum && sha256sum <"$1" 2>/dev/null | sed 's/ .*//'; }

section_files() {
  open_arr files
  for file in $HASH_FILES; do
    item; open_obj; kv_str path "$file"
    member present; json_bool [ -f "$file" ]
    if [ -r "$file" ]; then kv_str sha256 "$(sha256 "$file")"; else kv_str sha256 ''; fi
    close_obj
  done
  close_arr
}

section_cleanup() {
  open_obj ray
  member exists; json_bool [ -d /tmp/ray ]
  count=0
  set +f
  for dir in /tmp/ray/session_*; do
    [ -d "$dir" ] && [ ! -L "$dir" ] && count=$((count + 1))
  done
  set -f
  kv_num sessions "$count"
  size=''
  [ -d /tmp/ray ] && have du && size=$(du -sk /tmp/ray 2>/dev/null | sed 's/[^0-9].*//')
  kv_num size_bytes "${size:+$((size * 1024))}"
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
  kv_str daemon_json "$(read_file /etc/docker/daemon.json)"
  open_arr cdi_specs
  set +f
  for spec in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do
    [ -f "$spec" ] && { item; json_str "$spec"; }
  done
  set -f
  close_arr
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
    inspect='' running='' torch=''
    if [ -n "$cli" ] && have "$cli"; then
      inspect=$(bounded "$cli" inspect --type container -- "$name" 2>/dev/null) || inspect=''
      running=$(bounded "$cli" inspect --type container --format '{{.State.Running}}' -- "$name" 2>/dev/null)
      [ "$running" = true ] &&
        torch=$(bounded "$cli" exec "$name" python3 -c "$TORCH_PY" 2>/dev/null </dev/null)
    fi
    kv_str engine "$cli"
    kv_str inspect "$inspect"
    kv_str torch "$torch"
    close_obj
  done
  close_arr
}

section_gpu() {
  open_obj gpu
  member nvidia_smi; json_bool have nvidia-smi
  kv_str proc_version "$(read_file /proc/driver/nvidia/version)"
  query='' apps='' xml='' nvlink=''
  if have nvidia-smi; then
    [ -n "$GPU_FIELDS" ] &&
      query=$(bounded nvidia-smi --query-gpu="$GPU_FIELDS" --format=csv,noheader,nounits 2>&1)
    apps=$(bounded nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits 2>&1)
    xml=$(bounded nvidia-smi -q -x 2>/dev/null)
    nvlink=$(bounded nvidia-smi nvlink -s 2>/dev/null)
  fi
  kv_str query "$query"
  kv_str compute_apps "$apps"
  kv_str smi_xml "$xml"
  kv_str nvlink "$nvlink"
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

section_repos() {
  open_arr repos
  for entry in $REPOS; do
    path=${entry%%"$TAB"*} rest=${entry#*"$TAB"}
    lock=${rest%%"$TAB"*} rest=${rest#*"$TAB"}
    venv=${rest%%"$TAB"*}
    item; open_obj; kv_str path "$path"
    member exists; json_bool [ -d "$path" ]
    head='' status='' eol='' work_sha='' head_sha='' installed_sha=''
    if have git && [ -d "$path" ]; then
      head=$(git -C "$path" rev-parse HEAD 2>/dev/null)
      # gpurig's own CRLF->LF rewrites are not the user's changes (see git_changes.sh).
      status=$(git_changes "$path" | sed -n "s/^dirt$TAB//p")
      eol=$(git -C "$path" ls-files --eol -- '*.sh' '*.py' 2>/dev/null | sed -n "/w\/crlf/{s/^[^$TAB]*$TAB//;p;}")
      if [ -n "$lock" ] && [ -f "$path/$lock" ]; then
        work_sha=$(sha256 "$path/$lock")
        have sha256sum &&
          head_sha=$(git -C "$path" show "HEAD:$lock" 2>/dev/null | sha256sum | sed 's/ .*//')
      fi
      [ -n "$venv" ] && [ -f "$venv/.gpurig-lock.sha256" ] &&
        installed_sha=$(sed -n 1p "$venv/.gpurig-lock.sha256")
    fi
    kv_str head "$head"
    member dirty; if [ -n "$head" ]; then json_bool [ -n "$status" ]; else printf null; fi
    kv_str status "$status"
    kv_str crlf_files "$eol"
    kv_str lockfile "$lock"
    kv_str lockfile_sha256 "$work_sha"
    kv_str lockfile_head_sha256 "$head_sha"
    kv_str venv "$venv"
    kv_str lockfile_installed_sha256 "$installed_sha"
    close_obj
  done
  close_arr
}

section_packages() {
  open_obj packages
  installed='' held=''
  if have dpkg-query && [ -n "$PACKAGES" ]; then
    # shellcheck disable=SC2086  # one argument per declared package
    installed=$(IFS=$NL; dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null)
  fi
  have apt-mark && held=$(apt-mark showhold 2>/dev/null)
  kv_str dpkg "$installed"
  kv_str held "$held"
  close_obj
}

IFS=$NL
printf '{'
kv_num probe_version 1
section_host
section_cgroup
section_disks
section_core_dumps
section_files
section_cleanup
section_engine
section_containers
section_gpu
section_repos
section_packages
printf '}\n'
exit 0
