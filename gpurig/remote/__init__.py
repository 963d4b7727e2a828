"""pyinfra at the edge: drift over SSH, the converge runner, the inventory bridge, jump hosts, host
keys, the guard on pyinfra's run, gevent's patch."""
