# shellcheck shell=bash
# Sourced by run.sh (its helpers, $BG, $URL, $WORK): issue 11, items 3 and 6.
#   --password-file / $BLOOMGUARD_PASSWORD_FILE against an ACL user created for the test (needs
#   redis-cli; deleted at the end), their precedence, a missing / unreadable file named but never
#   its content; no usage message echoes a misplaced URL; an empty password in the URL is none;
#   ?db=N; the expire TTL bound.

# ---- no echo of a misplaced URL ---------------------------------------------------------
run_raw --url --url 'redis://:S3cr3t!Pw@127.0.0.1:1' info f
expect_rc "misplaced URL as the command" 64
expect_err "misplaced URL: named by position" 'unknown command \(argument 3, not shown'
if grep -q 'S3cr3t' "$ERR"; then bad "misplaced URL: no password in the message"; else ok "misplaced URL: no password in the message"; fi
run_raw --url 'redis://:S3cr3t!Pw/x@127.0.0.1:1' --timeout-ms 200 info f
expect_rc "unescaped / in the password parses (the last @ ends the userinfo)" 2
expect_err "... and fails only to connect" 'BG_E(CONN|TIMEOUT)'
if grep -q 'S3cr3t' "$ERR"; then bad "'/' in the password: not in the message"; else ok "'/' in the password: not in the message"; fi
run_raw --password=S3cr3t info f
expect_rc "unknown --password=VALUE" 64
expect_err "unknown --password=VALUE: only the name" "unknown option '--password=\.\.\.'"
if grep -q 'S3cr3t' "$ERR"; then bad "--password=VALUE not echoed"; else ok "--password=VALUE not echoed"; fi

# ---- the URL's query, an empty password, the TTL bound -----------------------------------
HP=${URL#redis://}
D=$(name querydb)
run_raw --url "redis://$HP?db=1" init "$D" --expected 100 --fpp 0.01
expect_rc "?db=1 on redis://" 0
if [ $have_rediscli -eq 1 ]; then
  a=$(rcli -n 1 exists "{$D}:config"); b=$(rcli exists "{$D}:config")
  if [ "$a" = 1 ] && [ "$b" = 0 ]; then ok "?db=1 selects database 1"; else RC=0; bad "?db=1 selects database 1" "db1 $a db0 $b"; fi
fi
run_raw --url "redis://$HP?db=1" delete "$D"
run_raw --url "redis://$HP?frobnicate=5" info x
expect_rc "unknown query parameter" 2
expect_err "unknown query parameter: named, with what is understood" 'query parameter "frobnicate" is not understood \(known: db, client_name'
run_raw --url "redis://:@$HP" delete "$(name emptypw)"
expect_rc "redis://:@host: an empty password is none" 0
E=$(name ttlbound)
run init "$E" --expected 100 --fpp 0.01
run expire "$E" --ttl-ms 70368744177665
expect_rc "expire above 2^46 ms" 64
expect_err "expire above 2^46 ms: the bound" '1\.\.70368744177664'
run expire "$E" --ttl-ms 70368744177664
expect_rc "expire at 2^46 ms" 0

# ---- --password-file and $BLOOMGUARD_PASSWORD_FILE --------------------------------------
run_raw --password-file "$WORK/no-such-file" --url "$URL" info x
expect_rc "missing password file" 2
expect_err "missing password file: named" "cannot open the password file $WORK/no-such-file \(--password-file\)"
run_raw --password-file "$WORK" --url "$URL" info x
expect_rc "a directory as the password file" 2
expect_err "a directory as the password file: named" "password file $WORK \(--password-file\)"
BLOOMGUARD_PASSWORD_FILE="$WORK/no-such-file" timeout 60 "$BG" --url "$URL" info x </dev/null >"$OUT" 2>"$ERR"
RC=$?
expect_rc "missing \$BLOOMGUARD_PASSWORD_FILE" 2
expect_err "missing \$BLOOMGUARD_PASSWORD_FILE: named" "no-such-file \(\\\$BLOOMGUARD_PASSWORD_FILE\)"

if [ $have_rediscli -eq 1 ]; then
  U="clitestpw$$"
  rcli ACL SETUSER "$U" on '>Fi1e!Secret' '~*' '&*' '+@all' >/dev/null
  printf 'Fi1e!Secret\n' >"$WORK/pw"
  printf 'Fi1e!Secret\r\nsecond line ignored\n' >"$WORK/pw-crlf"
  printf 'Wr0ng!Secret\n' >"$WORK/pw-wrong"
  UU="redis://$U@$HP"
  G=$(name pwfile)
  run_raw --url "$UU" --password-file "$WORK/pw" init "$G" --expected 100 --fpp 0.01
  expect_rc "--password-file: the first line is the password" 0
  run_raw --url "$UU" --password-file="$WORK/pw-crlf" info "$G"
  expect_rc "--password-file=PATH, CRLF line end, later lines ignored" 0
  BLOOMGUARD_PASSWORD_FILE="$WORK/pw" timeout 60 "$BG" --url "$UU" info "$G" </dev/null >"$OUT" 2>"$ERR"
  RC=$?
  expect_rc "\$BLOOMGUARD_PASSWORD_FILE" 0
  BLOOMGUARD_PASSWORD=Wr0ng!Secret timeout 60 "$BG" --url "$UU" --password-file "$WORK/pw" info "$G" </dev/null >"$OUT" 2>"$ERR"
  RC=$?
  expect_rc "--password-file beats \$BLOOMGUARD_PASSWORD" 0
  BLOOMGUARD_PASSWORD_FILE="$WORK/pw" BLOOMGUARD_PASSWORD=Wr0ng!Secret timeout 60 "$BG" --url "$UU" info "$G" </dev/null >"$OUT" 2>"$ERR"
  RC=$?
  expect_rc "\$BLOOMGUARD_PASSWORD_FILE beats \$BLOOMGUARD_PASSWORD" 0
  run_raw --url "$UU" --password-file "$WORK/pw-wrong" info "$G"
  expect_rc "wrong password in the file" 2
  expect_err "wrong password in the file: BG_EAUTH" 'BG_EAUTH'
  if grep -q 'Secret' "$ERR"; then bad "wrong password file: content not shown"; else ok "wrong password file: content not shown"; fi
  timeout 60 "$BG" --url "$UU" --password-file "$WORK/pw" lock "$G" --hold-ms 0 </dev/null >"$OUT" 2>"$ERR"
  RC=$?
  expect_rc "lock --password-file" 0
  expect_out "lock --password-file: acquired" '^acquired '
  run_raw --url "$UU" --password-file "$WORK/pw" delete "$G"
  rcli ACL DELUSER "$U" >/dev/null
fi

# ---- a URL where a file name or the filter NAME goes ------------------------------------------
run rotate "$(name rotfrom)" --expected 10 --fpp 0.1 --from 'redis://:S3cr3t!Pw@127.0.0.1:1'
expect_rc "rotate --from a URL" 2
if grep -q 'S3cr3t' "$ERR"; then bad "rotate --from a URL: not echoed"; else ok "rotate --from a URL: not echoed"; fi
run info 'redis://:S3cr3t!Pw@127.0.0.1:1'
expect_rc "a URL as the filter NAME" 64
expect_err "a URL as the filter NAME: says to use --url" 'looks like a server URL with a password: give the server with --url'
if grep -q 'S3cr3t' "$ERR"; then bad "a URL as the filter NAME: not echoed"; else ok "a URL as the filter NAME: not echoed"; fi
