# Uncommitted changes in the checkout $1, one per line: `dirt<TAB>PORCELAIN LINE` for a change
# the user made, `eol_only<TAB>FILE` for a tracked file whose only difference from its commit is
# CRLF made LF under an `eol=lf` attribute (gpurig's own line-ending fix, not the user's work).
git_changes() {
  git -C "$1" status --porcelain --untracked-files=no 2>/dev/null | while IFS= read -r line; do
    file=${line#???}
    if [ "${line%"$file"}" = " M " ] &&
      git -C "$1" check-attr eol -- "$file" 2>/dev/null | grep -q ': eol: lf$' &&
      git -C "$1" diff --quiet --ignore-cr-at-eol -- "$file" 2>/dev/null; then
      printf 'eol_only\t%s\n' "$file"
    else
      printf 'dirt\t%s\n' "$line"
    fi
  done
}
