# ---- iteration records

# record_result_read FILE: KEY=VALUE lines into R, never sourced: the contract's result.env keys
# only (ORBIT_RESULT_KEYS), and a numeric one (ORBIT_RESULT_NUMERIC) only when its value is
# a whole number or empty, so that nothing read from the file reaches arithmetic unchecked.
record_result_read() {
  local line k v
  R=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*}
    v=${line#*=}
    [[ $k =~ ^[A-Z_]{1,32}$ && " ${ORBIT_RESULT_KEYS[*]} " == *" $k "* ]] || continue
    if [[ -n $v && " ${ORBIT_RESULT_NUMERIC[*]} " == *" $k "* ]] && ! orbit_is_uint "$v"; then
      orbit_log "$1: $k is not a whole number: ignored"
      continue
    fi
    R[$k]=$v
  done <"$1"
}

# Move what an interrupted attempt left in an iteration directory aside (never deleted).
record_iter_prepare() {
  local dir=$1 k=1 f
  if [[ -L $dir ]]; then
    orbit_log "$dir is a symlink: removed (the record is written in a real directory)"
    rm -f -- "$dir"
  fi
  if [[ -d $dir ]] && [[ -n $(find "$dir" -maxdepth 1 -type f -print -quit) ]]; then
    while [[ -e $dir/interrupted.$k ]]; do k=$((k + 1)); done
    mkdir -p -- "$dir/interrupted.$k"
    for f in "$dir"/*; do
      if [[ -f $f ]]; then
        mv -- "$f" "$dir/interrupted.$k/"
      fi
    done
    orbit_log "iteration $(basename -- "$dir"): an interrupted attempt was kept in interrupted.$k"
  fi
  mkdir -p -- "$dir"
}

# ---- cost
record_cost_to_micro() {
  local v=$1
  [[ $v =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] || return 1
  awk -v x="$v" 'BEGIN { if (x < 0 || x > 1e9) exit 1; printf "%d", x * 1000000 + 0.5 }'
}

# When the agent's cost file counted over the engine's own report (the last run's cost:
# RUN_COST_M and RUN_COST_KIND, the engine's), COST_SOURCE_AGENT ("" otherwise: the
# engine's report for an engine that reports its cost, else the cost file, the estimate or
# nothing, as the contract's three columns say).
RUN_COST_SOURCE=

# record_cost_of_run LOG COSTFILE: sets RUN_COST_M, RUN_COST_KIND and RUN_COST_SOURCE. The
# engine's own report (its part's engine_cost_v) counts; the agent's cost file can only
# raise it, never lower it (an agent writing 0.0001 there does not make a $0.40 run
# cheap). Without a report, the cost file, else the estimate (cost-estimate-usd).
record_cost_of_run() {
  local log=$1 cfile=$2 v='' file_m=''
  engine_cost_run_is 0 "$COST_UNKNOWN"
  RUN_COST_SOURCE=
  engine_tokens_forget
  if [[ -s $cfile ]]; then
    v=$(head -c 64 -- "$cfile" | tr -d ' \n\r\t$')
  fi
  if [[ -n $v ]]; then
    file_m=$(record_cost_to_micro "$v") || file_m=''
  fi
  if [[ -f $log ]] && engine_cost_v "$log"; then
    if [[ -n $file_m ]] && ((file_m > RUN_COST_M)); then
      engine_cost_run_is "$file_m" "$COST_REPORTED"
      RUN_COST_SOURCE=$COST_SOURCE_AGENT
    elif [[ -n $file_m ]] && ((file_m < RUN_COST_M)); then
      orbit_log "the agent's cost file says \$$v, less than the engine's report: the report counts"
    fi
    return 0
  fi
  engine_cost_run_is 0 "$COST_UNKNOWN"
  if [[ -n $file_m ]]; then
    engine_cost_run_is "$file_m" "$COST_REPORTED"
    return 0
  fi
  if [[ -n $COST_ESTIMATE_M ]]; then
    engine_cost_run_is "$COST_ESTIMATE_M" "$COST_ESTIMATED"
  fi
}

# RUN_USAGE: the last run's cost and tokens as its agent_exit event holds them
# (cost_microusd, cost_kind, tokens_in and tokens_out where its engine counts them, and the
# model its session says it used).
RUN_USAGE=()
# record_run_usage: RUN_USAGE of the run record_cost_of_run last read.
record_run_usage() {
  RUN_USAGE=(cost_microusd "$RUN_COST_M" cost_kind "$RUN_COST_KIND")
  [[ -z $RUN_TOKENS_IN ]] || RUN_USAGE+=(tokens_in "$RUN_TOKENS_IN" tokens_out "$RUN_TOKENS_OUT")
  [[ -z $RUN_MODEL ]] || RUN_USAGE+=(model "$RUN_MODEL")
}

# The ledger's totals are read once per run (record_ledger_load) and kept up to date by
# record_ledger_append: the whole spend, and the spend and cost kinds of the latest iteration, by
# the one rule every reader of cost.ledger applies (orbit_ledger_sum_v).
LEDGER_TOTAL=0
LEDGER_IT=0
LEDGER_IT_SUM=0
LEDGER_IT_KINDS=' '
# record_ledger_load: the totals from cost.ledger, for iteration S[NEXT_ITERATION]. A torn last line
# (a write cut short) is ended with a newline first, so that the next append starts a line
# of its own; it counts only if it is a whole ledger line (only its newline was missing).
record_ledger_load() {
  local file="$LOOP_DIR/cost.ledger"
  LEDGER_IT=${S[NEXT_ITERATION]} LEDGER_TOTAL=0 LEDGER_IT_SUM=0 LEDGER_IT_KINDS=' '
  if [[ -f $file ]]; then
    record_ledger_sum_v "$LEDGER_IT"
    if ((ORBIT_LEDGER_TORN)); then
      orbit_log "cost.ledger ends in a torn line: ended with a newline (it counts only if it is a whole ledger line)"
      printf '\n' >>"$file" || state_records_fail "$file"
      record_ledger_sum_v "$LEDGER_IT"
    fi
    LEDGER_TOTAL=$REPLY LEDGER_IT_SUM=$ORBIT_LEDGER_ITER_SUM LEDGER_IT_KINDS=$ORBIT_LEDGER_ITER_KINDS
  fi
  # A spend is never lowered: a ledger that lost lines (emptied, cut) is not a refund, and
  # the state, which the journal seals, holds what was paid.
  if orbit_is_uint "${S[COST_MICROUSD]-}" && ((S[COST_MICROUSD] > LEDGER_TOTAL)); then
    orbit_log "cost.ledger sums to $LEDGER_TOTAL, less than the $(orbit_usd_text "${S[COST_MICROUSD]}") USD the state holds (lines lost or removed): the held spend counts"
    LEDGER_TOTAL=${S[COST_MICROUSD]}
  fi
}

# record_ledger_sum_v ITERATION: orbit_ledger_sum_v on this loop's cost.ledger; a ledger that
# cannot be read stops the run.
record_ledger_sum_v() {
  orbit_ledger_sum_v "$LOOP_DIR/cost.ledger" "$1" ||
    orbit_die "$EXIT_FAILURE" "cannot read $LOOP_DIR/cost.ledger: check its permissions, then rerun"
}

# record_ledger_append ITERATION MICRO_USD KIND [CANDIDATE] [SOURCE]: one line for one agent run
# (a fan-out's with its candidate, the contract's fourth column; "" for none), and the
# totals. SOURCE (record_cost_of_run's RUN_COST_SOURCE) ends the line when given: `agent` when
# the agent's cost file counted over the engine's report.
record_ledger_append() {
  local line="$1"$'\t'"$2"$'\t'"$3"
  [[ -n ${4:-} ]] && line+=$'\t'"$4"
  [[ -n ${5:-} ]] && line+=$'\t'"$5"
  # The cost counts in memory even when the ledger cannot take it (a link put in its place).
  if orbit_appendable "$LOOP_DIR/cost.ledger"; then
    printf '%s\n' "$line" >>"$LOOP_DIR/cost.ledger" || state_records_fail "$LOOP_DIR/cost.ledger"
  fi
  if [[ $1 != "$LEDGER_IT" ]]; then
    LEDGER_IT=$1 LEDGER_IT_SUM=0 LEDGER_IT_KINDS=' '
  fi
  if orbit_is_uint "$2"; then
    LEDGER_TOTAL=$((LEDGER_TOTAL + $2))
    LEDGER_IT_SUM=$((LEDGER_IT_SUM + $2))
  fi
  [[ $LEDGER_IT_KINDS == *" $3 "* ]] || LEDGER_IT_KINDS+="$3 "
}

# record_ledger_iter_sum_v N: REPLY is what iteration N's runs cost.
record_ledger_iter_sum_v() {
  if [[ $1 == "$LEDGER_IT" ]]; then
    REPLY=$LEDGER_IT_SUM
  else
    record_ledger_sum_v "$1"
    REPLY=$ORBIT_LEDGER_ITER_SUM
  fi
}

# The cost kind of the latest iteration's runs: reported, estimated, unknown, or partial
# (some runs reported or estimated, some unknown).
record_ledger_iter_kind_v() {
  local k=$LEDGER_IT_KINDS
  if [[ $k == *" $COST_UNKNOWN "* && ($k == *" $COST_REPORTED "* || $k == *" $COST_ESTIMATED "*) ]]; then
    REPLY=partial
  elif [[ $k == *" $COST_UNKNOWN "* ]]; then
    REPLY=$COST_UNKNOWN
  elif [[ $k == *" $COST_ESTIMATED "* ]]; then
    REPLY=$COST_ESTIMATED
  elif [[ $k == *" $COST_REPORTED "* ]]; then
    REPLY=$COST_REPORTED
  else
    REPLY=$COST_UNKNOWN
  fi
}
