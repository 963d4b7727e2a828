# writers PATH: who can change PATH, or what would be created there, as facts/safe_path.sh's
# walk finds it (its text comes before this): "0" where root alone can, the uid of the one
# other account that can, or "refused WHY" where nobody may act there. Shared by
# facts.gpurig_repo's RepoState and EnvImports.
writers() {
  if walk "$1"; then printf '%s\n' "${OWNER:-0}"; else printf 'refused %s\n' "$REFUSED"; fi
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
