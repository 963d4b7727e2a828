# as_account UID GID GROUPS COMMAND...: COMMAND run by root as that account alone (POSIX sh),
# the account dropped to whole: its uid and gid and, by GROUPS (--clear-groups or
# --init-groups), none or its own supplementary groups, an empty environment, a session
# keyring of its own (setpriv alone keeps root's, and with it every key a root session put
# there), bounds on its memory, CPU time and processes, and, where systemd runs, a cgroup
# scope of its own rather than root's service's. Nothing of the account's is resolved by root:
# COMMAND's paths are the account's to resolve. Returns 126, saying why, where the drop
# cannot be made whole.
AS_ACCOUNT_KEYRING='import ctypes, os, sys
keyctl = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)
# KEYCTL_JOIN_SESSION_KEYRING (1) with no name: a new anonymous session keyring.
if keyctl is None or libc.syscall(keyctl, 1, None) < 0:
    sys.exit("gpurig: could not start a session keyring of its own")
os.execvp(sys.argv[1], sys.argv[1:])'
as_account() {
  a_uid=$1 a_gid=$2 a_groups=$3
  shift 3
  set -- setpriv --reuid="$a_uid" --regid="$a_gid" "$a_groups" --reset-env "$@"
  if command -v keyctl >/dev/null 2>&1; then
    set -- keyctl session - "$@"
  elif [ -x /usr/bin/python3 ]; then
    set -- /usr/bin/python3 -I -S -c "$AS_ACCOUNT_KEYRING" "$@"
  else
    echo "gpurig: no keyctl (keyutils) or python3 to give uid $a_uid a keyring of its own" >&2
    return 126
  fi
  command -v prlimit >/dev/null 2>&1 || {
    echo "gpurig: no prlimit (util-linux) to bound what uid $a_uid runs" >&2
    return 126
  }
  # 4 GiB of address space, 10 minutes of CPU, 4096 processes of the account's in all.
  set -- prlimit --as=4294967296 --cpu=600 --nproc=4096 -- "$@"
  # (Not from a PID namespace of its own, such as the import check's, which contains it
  # already: systemd would be told a pid it does not know.)
  if [ -d /run/systemd/system ] && command -v systemd-run >/dev/null 2>&1 &&
    [ "$(readlink /proc/self/ns/pid)" = "$(readlink /proc/1/ns/pid)" ]; then
    set -- systemd-run --quiet --scope --collect -p TasksMax=512 -- "$@"
  fi
  "$@"
}
