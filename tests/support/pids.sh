# Process identity for the test scripts (sourced by tests/e2e/lib.sh and tests/support/emulators.sh).
#
# A PID alone does not name a process for long: pid_max is 32768 on this machine kind, and a CI run forks thousands of
# processes a minute, so the PID of a process that died is soon handed to another, perhaps another suite's emulator.
# Record a process's start time when it is started, and signal its PID later only while the start time still matches.
#
#   pid_start_time PID [VAR]  the start time of PID (field 22 of /proc/PID/stat), printed, or put in VAR; fails when
#                             PID is gone. With VAR it forks nothing, so that recording it at every spawn does not
#                             slow down suites that start processes all at once (the stampedes).
#   same_process PID START    PID is still the process whose start time was START (false when START is empty)
#   pid_running PID           PID names a process that has not exited (a zombie counts as gone)
#   running_process PID START same_process, and PID has not exited: a process killed a moment ago keeps its PID and
#                             start time as a zombie until its parent reaps it, and when the shell that started it
#                             has left, that parent is PID 1, which may take its time on a busy machine

pid_start_time() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) } # drop "pid (comm) ", comm may hold spaces
  local var=${2:-}
  set -- $stat # the remaining fields start at field 3
  if [ -n "$var" ]; then printf -v "$var" '%s' "${20}"; else echo "${20}"; fi
}

same_process() {
  local now
  [ -n "$2" ] && pid_start_time "$1" now && [ "$now" = "$2" ]
}

pid_running() {
  local state
  state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

running_process() { same_process "$1" "$2" && pid_running "$1"; }
