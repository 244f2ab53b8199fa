# kind node base built from a debootstrap'ed Debian rootfs (no registry needed).
# Follows sigs.k8s.io/kind images/base: same static files, same systemd pruning, but
# Debian's containerd 1.6 / runc / CNI plugins instead of upstream builds.
ARG ROOTFS
FROM ${ROOTFS}
# files/ = kind's images/base/files (modes set by build.sh) + our CNI conflist and
# containerd settings (restrict_oom_score_adj = true, sandbox_image = pause:3.10.1)
COPY files/ /
RUN set -eux; \
    find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete; \
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; \
    echo "ReadKMsg=no" >> /etc/systemd/journald.conf; \
    ln -sf /lib/systemd/systemd /sbin/init; \
    ln -sf /usr/bin/containerd /usr/local/bin/containerd; \
    mkdir -p /opt/cni/bin /etc/kubernetes/manifests; \
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
