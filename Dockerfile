# SHarness images: one target per component, each FROM scratch with prebuilt static binaries, so
# the build is offline (DESIGN.md §8). hack/build-images.sh prepares the bin/ context and builds
# every target; building this file directly without it fails on the missing bin/ folders.

# agent: the demo agent (today a confinement self-report) with a busybox userland for its tools.
# bin/agent-rootfs holds /sharness-agent, /bin/busybox and its applet links, /etc/passwd, /tmp.
FROM scratch AS agent
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-agent" \
      org.opencontainers.image.description="SHarness demo agent: confinement self-report" \
      ai.sharness.component="agent"
COPY bin/agent-rootfs/ /
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/sharness-agent"]
