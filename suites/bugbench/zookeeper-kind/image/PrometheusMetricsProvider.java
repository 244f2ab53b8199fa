// A stand-in for ZooKeeper's Prometheus metrics provider, which the
// operator's zoo.cfg names (metricsProvider.className) and without which
// ZooKeeper refuses to start. Debian builds ZooKeeper without it (the
// Prometheus client libraries are not packaged), so this image serves no
// metrics on the metrics port; nothing in the operator or its scripts reads
// them. Written for this image; ../images.sh compiles it against Debian's
// zookeeper.jar.
package org.apache.zookeeper.metrics.prometheus;

import java.util.Properties;
import org.apache.zookeeper.metrics.impl.NullMetricsProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class PrometheusMetricsProvider extends NullMetricsProvider {
    private static final Logger LOG = LoggerFactory.getLogger(PrometheusMetricsProvider.class);

    @Override
    public void configure(Properties configuration) {
        LOG.warn("metricsProvider: no Prometheus metrics in this image (Debian's ZooKeeper is built without them); "
            + "metricsProvider.httpPort={} is not served", configuration.getProperty("httpPort"));
    }
}
