# procs.sh: bash helpers to run background services with pid files. Source it:
#   . tests/mocks/lib/procs.sh
#
#   procs_start PIDFILE LOGFILE CMD [ARGS...]
#       Start CMD detached (own session via setsid, stdin /dev/null, stdout+stderr
#       appended to LOGFILE) and write its pid to PIDFILE. Fails (status 1) if PIDFILE
#       names a live process already, or if CMD dies within 0.1 s (the log's tail is
#       printed on stderr). Returns at once otherwise; use wait-port to wait for a
#       listener. The pid is the command's own pid (setsid does not fork here).
#   procs_stop PIDFILE [GRACE_S]
#       SIGTERM the process group of the pid in PIDFILE (the whole service: setsid
#       made it a group leader), wait up to GRACE_S seconds (default 5) for the
#       process to go, then SIGKILL the group. Removes PIDFILE. Quiet and idempotent:
#       a missing PIDFILE or a dead pid is success.
#   procs_alive PIDFILE
#       Status 0 if PIDFILE names a live (non-zombie) process.
#   procs_none_left PATTERN
#       Status 0 if no live (non-zombie) process has PATTERN (fixed string) in its
#       command line; otherwise prints "PID CMDLINE" for each one and returns 1.
#       Use a temporary folder's path as the pattern to check a test left nothing.
#
# Zombies are treated as gone: in some containers pid 1 does not reap orphans.

_procs_live() { # pid -> status 0 if alive and not a zombie
	local s
	[[ $1 =~ ^[0-9]+$ ]] || return 1
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ]
}

procs_alive() {
	[ -s "$1" ] && _procs_live "$(cat "$1")"
}

procs_start() {
	local pidfile=$1 log=$2 pid
	shift 2
	if procs_alive "$pidfile"; then
		echo "procs_start: $pidfile: already running (pid $(cat "$pidfile"))" >&2
		return 1
	fi
	setsid "$@" </dev/null >>"$log" 2>&1 &
	pid=$!
	disown "$pid" 2>/dev/null || true # no "Killed" job notice from procs_stop
	echo "$pid" >"$pidfile"
	sleep 0.1
	if ! _procs_live "$pid"; then
		echo "procs_start: $1 exited at once; last lines of $log:" >&2
		tail -n 10 "$log" >&2
		rm -f "$pidfile"
		return 1
	fi
}

procs_stop() {
	local pidfile=$1 grace=${2:-5} pid i
	[ -s "$pidfile" ] || { rm -f "$pidfile"; return 0; }
	pid=$(cat "$pidfile")
	if _procs_live "$pid"; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
		for ((i = 0; i < grace * 20; i++)); do
			_procs_live "$pid" || break
			sleep 0.05
		done
		kill -KILL -- "-$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
		for ((i = 0; i < 40; i++)); do
			_procs_live "$pid" || break
			sleep 0.05
		done
	fi
	rm -f "$pidfile"
	return 0
}

procs_none_left() {
	local pat=$1 p line rc=0
	for p in /proc/[0-9]*; do
		_procs_live "${p#/proc/}" || continue
		line=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
		if [[ $line == *"$pat"* ]]; then
			[ "${p#/proc/}" = "$$" ] || [ "${p#/proc/}" = "$BASHPID" ] && continue
			echo "${p#/proc/} $line"
			rc=1
		fi
	done
	return $rc
}
