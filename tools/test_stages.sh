# Sourced by tools/run_tests.sh and tools/run_tests_extended.sh: each stage prints one line when it starts
# (what it does, about how long it takes: the time it took on the previous run here, else a typical time
# on a 2-core machine) and one when it ends, with its elapsed time.
# Before sourcing, set times_file (where "stage seconds" of the previous run are kept).
t_all=$SECONDS
declare -A t_prev=() t_start=()
if [ -f "$times_file" ]; then
  while read -r k v; do t_prev[$k]=$v; done <"$times_file" 2>/dev/null
fi
times_new="$times_file.new"
mkdir -p "$(dirname "$times_file")" && : >"$times_new"
# stage_begin KEY "WHAT" TYPICAL_SECONDS: prints what the stage does and about how long it takes.
stage_begin() {
  local est=${t_prev[$1]:-$3} src="typical"
  [ -n "${t_prev[$1]:-}" ] && src="last run"
  t_start[$1]=$SECONDS
  printf '%s: [%s] %s (about %s s, %s)\n' "$stage_tool" "$1" "$2" "$est" "$src"
}
# stage_end KEY [NOTE]: prints the elapsed time of the stage.
stage_end() {
  local dt=$((SECONDS - ${t_start[$1]}))
  printf '%s: [%s] done in %d s%s\n' "$stage_tool" "$1" "$dt" "${2:+ ($2)}"
  echo "$1 $dt" >>"$times_new"
}
# stages_done: keeps this run's times for the next run's estimates and prints the total.
stages_done() {
  mv -f "$times_new" "$times_file" 2>/dev/null
  printf '%s: all stages took %dm%02ds\n' "$stage_tool" $(((SECONDS - t_all) / 60)) $(((SECONDS - t_all) % 60))
}
