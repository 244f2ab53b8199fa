#!/usr/bin/env bash
# The environment Debian's zkServer.sh, zkCli.sh and zkCleanup.sh source,
# installed by ../images.sh as /usr/share/zookeeper/bin/zkEnv.sh in place
# of Debian's link to /etc/zookeeper/conf/environment. It gives them what
# the scripts of pravega/zookeeper-operator's image expect of the upstream
# distribution: `zkServer.sh --config DIR ...` (zookeeperStart.sh passes
# /data/conf), a configuration folder that defaults to /conf, the console
# logging the operator's log4j.properties describes, and ZK_SERVER_HEAP /
# ZK_CLIENT_HEAP (megabytes) for the heap. Written for this image; sourced,
# so it may shift the caller's arguments.

# `--config DIR` first: the configuration folder for this run.
if [ "$1" = "--config" ] && [ -n "$2" ]; then
  ZOOCFGDIR=$2
  shift 2
fi
ZOOCFGDIR=${ZOOCFGDIR:-${ZOO_CONF_DIR:-/conf}}
ZOOCFG="$ZOOCFGDIR/${ZOOCFG:-zoo.cfg}"
export ZOOCFGDIR

ZOO_LOG_DIR=${ZOO_LOG_DIR:-/logs}
JAVA=${JAVA:-java}
if [ -n "$JAVA_HOME" ]; then
  JAVA="$JAVA_HOME/bin/java"
fi

# The configuration folder first (log4j.properties), then Debian's
# ZooKeeper (whose manifest names its own dependencies), the slf4j binding
# to log4j 1.2 that the operator's log4j.properties is written for, and the
# jars of /usr/share/zookeeper/lib (this image's metrics provider).
CLASSPATH="$ZOOCFGDIR:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
for jar in /usr/share/zookeeper/lib/*.jar; do
  [ -e "$jar" ] && CLASSPATH="$CLASSPATH:$jar"
done
export CLASSPATH

# The operator's log4j.properties roots its logger at
# ${zookeeper.root.logger}, which upstream's scripts set (ZOO_LOG4J_PROP,
# INFO,CONSOLE by default) and Debian's do not.
JVMFLAGS="-Dzookeeper.root.logger=${ZOO_LOG4J_PROP:-INFO,CONSOLE} $JVMFLAGS"

if [ -n "$ZK_SERVER_HEAP" ]; then
  SERVER_JVMFLAGS="-Xmx${ZK_SERVER_HEAP}m $SERVER_JVMFLAGS"
fi
if [ -n "$ZK_CLIENT_HEAP" ]; then
  CLIENT_JVMFLAGS="-Xmx${ZK_CLIENT_HEAP}m $CLIENT_JVMFLAGS"
fi
