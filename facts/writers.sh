# writers PATH: who can change PATH, or what would be created there: the owner of it (of its
# nearest existing ancestor when it does not exist yet) and of every directory above it, one
# uid a line, or "shared DIR" where a group or other users may write, or "unknown DIR"
# without readlink or stat. POSIX sh; shared by facts.gpurig_repo's RepoState and EnvImports.
writers() {
  p=$1
  while [ ! -e "$p" ] && [ "$p" != / ]; do p=${p%/*}; [ -n "$p" ] || p=/; done
  p=$(readlink -f -- "$p" 2>/dev/null) || { printf 'unknown %s\n' "$1"; return; }
  while :; do
    info=$(stat -c '%u %a' -- "$p" 2>/dev/null) || { printf 'unknown %s\n' "$p"; return; }
    case ${info#* } in *[2367]? | *[2367]) printf 'shared %s\n' "$p"; return ;; esac
    printf '%s\n' "${info%% *}"
    [ "$p" = / ] && return
    p=${p%/*}
    [ -n "$p" ] || p=/
  done
}
