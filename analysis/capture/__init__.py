"""Everything that runs Nsight Systems: finding nsys and its capture flags (nsys.py, the one
definition scripts/lib.sh also reads), `gapscope profile` (profile.py), the in-program hook's
environment and untraced runs (hook.py), step functions for nsys's Python trace
(step_functions.py), and `gapscope doctor` (doctor.py)."""
