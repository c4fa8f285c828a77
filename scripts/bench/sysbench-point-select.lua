#!/usr/bin/env sysbench
-- sysbench point-select over loadgen's own table and query (scripts/bench.sh mysql):
-- one server-side prepared statement per connection, one random id in 1..1000000 per event.
-- Each event is one lookup, so sysbench's transactions/s = lookups/s.
local QUERY = "SELECT user_name, user_email, created FROM usr WHERE user_id = ?"
local MAX_ID = 1000000

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  stmt = con:prepare(QUERY)
  id = stmt:bind_create(sysbench.sql.type.INT)
  stmt:bind_param(id)
end

function event()
  id:set(sysbench.rand.uniform(1, MAX_ID))
  local rs = stmt:execute()
  rs:free()
end

function thread_done()
  stmt:close()
  con:disconnect()
end
