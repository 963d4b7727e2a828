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

# git_writers CHECKOUT: who can change what git reads and runs there (its .git directory, its
# config and hooks), in writers()'s words, or "linked PATH" where .git, or an entry in it, is
# a link or a file naming a git directory elsewhere. git runs programs a repository's config
# names (core.fsmonitor, filters, hooks), so as root it runs only where this prints root alone.
git_writers() {
  g=$1/.git
  if [ -L "$g" ] || { [ -e "$g" ] && [ ! -d "$g" ]; }; then printf 'linked %s\n' "$g"; return; fi
  [ -d "$g" ] || return 0
  found=$(find "$g" -maxdepth 2 \( ! -uid 0 -printf '%U\n' -quit \) -o \
    \( -type l -printf 'linked %p\n' -quit \) -o \( -perm /022 -printf 'shared %p\n' -quit \) \
    2>/dev/null) || { printf 'unknown %s\n' "$g"; return; }
  [ -z "$found" ] || printf '%s\n' "$found"
}
