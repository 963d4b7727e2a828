# walk PATH: the path root may act on, as gpurig/safe_path.py walks it (see its docstring; a
# unit test holds the two to the same verdicts). PATH is walked from / one component at a
# time, never resolved first: `stat` of each (owner, mode, type, without following it), a link
# followed where it sits. Sets CHECKED (the path as walked, links resolved), HELD (the same but
# the last component kept as named), OWNER (the one account but root that could change it,
# empty for root alone) and REFUSED (why nobody may act); returns 1 when refused. POSIX sh:
# its variables start with w_ (sh has no locals). One `stat` answers for every component
# up to the next link (w_batch): a walk costs a process a link, not one a component.
walk() {
  CHECKED=$1 HELD=$1 OWNER='' REFUSED='' w_held='' w_links=0 w_at=/ w_rest=$1 w_lines=''
  case $1 in /*) ;; *) REFUSED="not an absolute path: $1"; return 1 ;; esac
  w_batch / && w_queued=1 && w_next / && w_own "$w_uid" / || return 1
  w_top=$w_info
  while :; do
    w_strip "$w_rest"; w_rest=$w_s
    [ -n "$w_rest" ] || break
    [ -n "$w_queued" ] || { w_batch; w_queued=1; }
    w_name=${w_rest%%/*}
    case $w_rest in */*) w_rest=${w_rest#*/} ;; *) w_rest='' ;; esac
    if [ "$w_name" = .. ]; then
      w_at=${w_at%/*}; [ -n "$w_at" ] || w_at=/
      w_stat "$w_at" || return 1
      w_queued=''
      continue
    fi
    w_last=0
    w_strip "$w_rest"
    [ -n "$w_held" ] || [ -n "$w_s" ] || w_last=1
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
    w_next "$w_entry" || return 1
    if [ $w_sticky = 1 ]; then w_own "$w_uid" "$w_entry" || return 1; fi
    if [ "$w_type" = "symbolic link" ]; then
      w_links=$((w_links + 1))
      if [ $w_links -gt 40 ]; then REFUSED="more than 40 links in $1"; return 1; fi
      w_target=$(readlink -- "$w_entry") && [ -n "$w_target" ] ||
        { REFUSED="cannot read the link $w_entry"; return 1; }
      w_mode=$w_holder w_queued=''
      case $w_target in /*) w_at=/ w_info=$w_top; w_parse ;; esac
      w_rest=$w_target${w_rest:+/$w_rest}
      continue
    fi
    w_own "$w_uid" "$w_entry" || return 1
    if [ "$w_type" != directory ]; then
      w_strip "$w_rest"
      if [ -n "$w_s" ]; then REFUSED="$w_entry is not a directory"; return 1; fi
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

# Sets w_s to PATH with its leading slashes and `.` components dropped (no subshell: a walk
# runs on every node contract's read).
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
}

w_nl='
'

# Sets w_uid, w_mode (octal) and w_type of PATH itself (a link is not followed).
w_stat() {
  w_info=$(stat -c '%u %a %F' -- "$1" 2>/dev/null) || { REFUSED="cannot stat $1"; return 1; }
  w_parse
}

# Takes the next of w_batch's lines, for PATH.
w_next() {
  case $w_lines in
    '') REFUSED="cannot stat $1"; return 1 ;;
    *"$w_nl"*) w_info=${w_lines%%"$w_nl"*} w_lines=${w_lines#*"$w_nl"} ;;
    *) w_info=$w_lines w_lines='' ;;
  esac
  w_parse
}

w_parse() {
  w_uid=${w_info%% *} w_mode=${w_info#* } w_type=${w_info#* * }
  w_mode=${w_mode%% *}
}

# Sets w_lines to `stat`'s line for each component of w_rest under w_at, in order, up to a
# `..` (after FIRST's, when given): one process for them all. Past a link the kernel follows it, but the walk stops using
# the lines at a link and asks again from its target; a missing component ends the lines
# (nothing below it exists), and so the walk's count of them.
w_batch() {
  w_p=$w_at w_r=$w_rest
  set -- "$@"
  while :; do
    w_strip "$w_r"; w_r=$w_s
    [ -n "$w_r" ] || break
    w_n=${w_r%%/*}
    case $w_r in */*) w_r=${w_r#*/} ;; *) w_r='' ;; esac
    [ "$w_n" != .. ] || break
    if [ "$w_p" = / ]; then w_p=/$w_n; else w_p=$w_p/$w_n; fi
    set -- "$@" "$w_p"
  done
  w_lines=''
  [ $# = 0 ] || w_lines=$(stat -c '%u %a %F' -- "$@" 2>/dev/null)
  return 0 # a missing component fails stat: the walk tells it by the lines it has
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
