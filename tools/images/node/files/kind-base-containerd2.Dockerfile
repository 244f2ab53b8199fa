# kind node base with containerd 2 (built from its Go module, bin/node/containerd/<v>) for
# Kubernetes 1.36+, from the same debootstrap'ed Debian rootfs as kind-base.Dockerfile:
# kind's images/base files and systemd pruning, Debian's runc and CNI plugins, but
# Debian's containerd 1.6 binaries removed so that nothing finds them.
ARG ROOTFS
FROM ${ROOTFS}
# files/ = kind's images/base/files (modes set by build.sh) without its containerd config:
# build.sh writes /etc/containerd/config.toml (version 3) into each node image.
COPY files/ /
COPY containerd/ /usr/local/bin/
RUN set -eux; \
    find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete; \
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; \
    echo "ReadKMsg=no" >> /etc/systemd/journald.conf; \
    ln -sf /lib/systemd/systemd /sbin/init; \
    rm -f /usr/bin/containerd /usr/bin/containerd-shim /usr/bin/containerd-shim-runc-v1 \
          /usr/bin/containerd-shim-runc-v2 /usr/bin/ctr /lib/systemd/system/containerd.service; \
    chmod 0755 /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/bin/ctr; \
    mkdir -p /opt/cni/bin /etc/kubernetes/manifests /etc/cni/net.d; \
    for p in /usr/lib/cni/*; do ln -sf "$p" /opt/cni/bin/; done; \
    ctr oci spec \
      | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json; \
    systemctl enable kubelet.service containerd.service undo-mount-hacks.service; \
    systemctl mask systemd-binfmt.service; \
    containerd --version; runc --version | head -1
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
