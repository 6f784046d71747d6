# ---- what an engine's tokens cost by TOKEN_PRICES: rendered into the loops of the engines
# ---- whose CLI reports tokens, not a cost (codex, gemini, qwen, opencode), after lib/engine.sh.
# engine_tokens_engine_price_v MODEL: REPLY is "INPUT CACHED OUTPUT", USD per million tokens, for MODEL
# from TOKEN_PRICES (`model=input/cached/output` words): the model itself, else the
# longest entry its name begins with, else `*`. Status 1 when none applies.
engine_tokens_engine_price_v() {
  local model=$1 w key best='' bestlen=-1 star=''
  for w in $TOKEN_PRICES; do
    key=${w%%=*}
    if [[ $key == "*" ]]; then
      star=${w#*=}
    elif [[ $model == "$key" ]]; then
      best=${w#*=}
      bestlen=100000
    elif [[ $model == "$key"* ]] && ((${#key} > bestlen)); then
      best=${w#*=}
      bestlen=${#key}
    fi
  done
  [[ -n $best ]] || best=$star
  [[ -n $best ]] || return 1
  REPLY=${best//\// }
}

# engine_tokens_cost_v MODEL INPUT CACHED OUTPUT: REPLY is what the tokens cost, in
# micro-USD (input counts the cached tokens too, as both CLIs report it). Status 1 when no
# price applies.
engine_tokens_cost_v() {
  engine_tokens_engine_price_v "$1" || return 1
  local -a price
  read -r -a price <<<"$REPLY"
  REPLY=$(awk -v i="$2" -v c="$3" -v o="$4" -v pi="${price[0]}" -v pc="${price[1]}" -v po="${price[2]}" \
    'BEGIN { if (c > i) c = i; printf "%d", (i - c) * pi + c * pc + o * po + 0.5 }')
}
