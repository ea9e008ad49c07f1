#!/usr/bin/env bash
source .carry/env.sh >/dev/null
export PYTHONPATH=$PWD:$PYTHONPATH HF_HUB_OFFLINE=1
mkdir -p $OUT/logs /tmp/ft
python3 .wt/lead/ftrace.py /tmp/ft > $OUT/logs/ftrace.log 2>&1
for k in old new text llama; do
  timeout 100 $NSYS profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --python-functions-trace=/tmp/ft/$k.json \
    -o /tmp/ft/$k -f true python3 examples/nokv_loop.py --size tiny --new-tokens 8 > /tmp/ft/$k.log 2>&1
  echo "$k rc=$?" >> $OUT/logs/ftrace.log
  timeout 60 $NSYS export --type sqlite -o /tmp/ft/$k.sqlite -f true /tmp/ft/$k.nsys-rep > /dev/null 2>&1
  python3 - "$k" >> $OUT/logs/ftrace.log 2>&1 <<'P'
import sqlite3, sys
k = sys.argv[1]
db = sqlite3.connect(f"/tmp/ft/{k}.sqlite")
rows = db.execute("select coalesce(e.text, s.value) n, count(*) from NVTX_EVENTS e left join StringIds s on e.textId = s.id group by n order by 2 desc limit 8").fetchall()
print(k, rows)
P
  grep -i -E "error|warn|python|trace" /tmp/ft/$k.log | head -8 >> $OUT/logs/ftrace.log
done
cat $OUT/logs/ftrace.log
