# host_fork_sqlite.py - issue item 1 in Python: the stdlib sqlite3 in a
# thread while the main thread forks (os.fork), as a logger thread beside
# DataLoader workers does.
import os
import sqlite3
import threading

stop = False


def logger():
    db = sqlite3.connect(":memory:")
    db.execute("create table t(x)")
    while not stop:
        db.execute("insert into t values(randomblob(100))")
        db.execute("delete from t where rowid % 2 = 0")
    db.close()


t = threading.Thread(target=logger)
t.start()
bad = 0
for i in range(20):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    bad += status != 0
stop = True
t.join()
print("20 forks,", bad, "bad")
