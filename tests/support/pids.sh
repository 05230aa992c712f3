# Process identity for the test scripts (sourced by tests/e2e/lib.sh and tests/support/emulators.sh).
#
# A PID alone does not name a process for long: pid_max is 32768 on this machine kind, and a CI run forks thousands of
# processes a minute, so the PID of a process that died is soon handed to another, perhaps another suite's emulator.
# Record a process's start time when it is started, and signal its PID later only while the start time still matches.
#
#   pid_start_time PID      prints the start time of PID (field 22 of /proc/PID/stat); fails when PID is gone
#   same_process PID START  PID is still the process whose start time was START (false when START is empty)

pid_start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) } # drop "pid (comm) ", comm may hold spaces
  set -- $stat      # the remaining fields start at field 3
  echo "${20}"
}

same_process() { [ -n "$2" ] && [ "$(pid_start_time "$1")" = "$2" ]; }
