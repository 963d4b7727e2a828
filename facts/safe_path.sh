# walk PATH: the path root may act on, as gpurig/safe_path.py walks it (see its docstring; a
# unit test holds the two to the same verdicts). PATH is walked from / one component at a
# time, never resolved first: `stat` of each (owner, mode, type, without following it), a link
# followed where it sits. Sets CHECKED (the path as walked, links resolved), HELD (the same but
# the last component kept as named), OWNER (the one account but root that could change it,
# empty for root alone) and REFUSED (why nobody may act); returns 1 when refused. POSIX sh:
# its variables start with w_ (sh has no locals).
walk() {
  CHECKED=$1 HELD=$1 OWNER='' REFUSED='' w_held='' w_links=0 w_at=/ w_rest=$1
  case $1 in /*) ;; *) REFUSED="not an absolute path: $1"; return 1 ;; esac
  w_stat / && w_own "$w_uid" / || return 1
  while :; do
    w_rest=$(w_strip "$w_rest")
    [ -n "$w_rest" ] || break
    w_name=${w_rest%%/*}
    case $w_rest in */*) w_rest=${w_rest#*/} ;; *) w_rest='' ;; esac
    if [ "$w_name" = .. ]; then
      w_at=${w_at%/*}; [ -n "$w_at" ] || w_at=/
      w_stat "$w_at" || return 1
      continue
    fi
    w_last=0
    [ -n "$w_held" ] || [ -n "$(w_strip "$w_rest")" ] || w_last=1
    w_sticky=0
    case $w_mode in [1357]???) w_sticky=1 ;; esac
    if [ $w_sticky = 0 ] && w_writable; then
      REFUSED="a group or other accounts may write $w_at"; return 1
    fi
    if [ "$w_at" = / ]; then w_entry=/$w_name; else w_entry=$w_at/$w_name; fi
    [ $w_last = 0 ] || w_held=$w_entry
    if [ ! -e "$w_entry" ] && [ ! -L "$w_entry" ]; then
      if w_writable; then REFUSED="other accounts may write $w_at"; return 1; fi
      CHECKED=$w_entry${w_rest:+/$w_rest} HELD=${w_held:-$CHECKED}
      return 0
    fi
    w_holder=$w_mode
    w_stat "$w_entry" || return 1
    if [ $w_sticky = 1 ]; then w_own "$w_uid" "$w_entry" || return 1; fi
    if [ "$w_type" = "symbolic link" ]; then
      w_links=$((w_links + 1))
      if [ $w_links -gt 40 ]; then REFUSED="more than 40 links in $1"; return 1; fi
      w_target=$(readlink -- "$w_entry") && [ -n "$w_target" ] ||
        { REFUSED="cannot read the link $w_entry"; return 1; }
      case $w_target in /*) w_at=/ ;; esac
      w_mode=$w_holder
      [ "$w_at" != / ] || w_stat / || return 1
      w_rest=$w_target${w_rest:+/$w_rest}
      continue
    fi
    w_own "$w_uid" "$w_entry" || return 1
    if [ "$w_type" != directory ]; then
      if [ -n "$(w_strip "$w_rest")" ]; then REFUSED="$w_entry is not a directory"; return 1; fi
      if w_writable; then REFUSED="a group or other accounts may write $w_entry"; return 1; fi
      CHECKED=$w_entry HELD=${w_held:-$w_entry}
      return 0
    fi
    w_at=$w_entry
  done
  if w_writable; then
    case $w_mode in
      [1357]???) REFUSED="other accounts may write $w_at" ;;
      *) REFUSED="a group or other accounts may write $w_at" ;;
    esac
    return 1
  fi
  CHECKED=$w_at HELD=${w_held:-$w_at}
}

# PATH with its leading slashes and `.` components dropped.
w_strip() {
  w_s=$1
  while :; do
    case $w_s in
      /*) w_s=${w_s#/} ;;
      ./*) w_s=${w_s#./} ;;
      .) w_s='' ;;
      *) break ;;
    esac
  done
  printf '%s' "$w_s"
}

# Sets w_uid, w_mode (octal) and w_type of PATH itself (a link is not followed).
w_stat() {
  w_info=$(stat -c '%u %a %F' -- "$1" 2>/dev/null) ||
    { REFUSED="cannot stat $1"; return 1; }
  w_uid=${w_info%% *} w_mode=${w_info#* } w_type=${w_info#* * }
  w_mode=${w_mode%% *}
}

w_writable() { case $w_mode in *[2367]? | *[2367]) return 0 ;; esac; return 1; }

# Records UID as able to change WHAT; refuses a second account besides root.
w_own() {
  [ "$1" != 0 ] || return 0
  if [ -z "$OWNER" ]; then OWNER=$1; return 0; fi
  [ "$OWNER" = "$1" ] && return 0
  REFUSED="several accounts (uids $OWNER and $1) can change $2"
  return 1
}

# checked PATH: prints the path to act on, as root only where root alone can change it (else
# says why on stderr and returns 1); another login acts on its own paths as declared.
checked() {
  if [ "$(id -u)" != 0 ]; then printf '%s\n' "$1"; return 0; fi
  walk "$1" || { printf 'gpurig: %s: %s\n' "$1" "$REFUSED" >&2; return 1; }
  if [ -n "$OWNER" ]; then
    printf 'gpurig: %s: uid %s can change it; root does not act there\n' "$1" "$OWNER" >&2
    return 1
  fi
  printf '%s\n' "$CHECKED"
}
