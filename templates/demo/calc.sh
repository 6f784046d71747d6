#!/usr/bin/env bash
# calc.sh — a tiny calculator library: the project the orbit demo's agent works on.

add() {
  echo 0
}

mul() {
  echo 0
}
