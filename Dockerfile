# SHarness images: one target per component, each FROM scratch with prebuilt static binaries, so
# the build is offline (docs/architecture.md, "The tree"). hack/build-images.sh prepares the bin/ context and builds
# every target; building this file directly without it fails on the missing bin/ folders.

# agent: the demo agent (a confinement self-report and a model conversation through llm),
# sharness-probe (the side-door suite) and sharness-modelprobe (the model path's doors), with a
# busybox userland and real curl and git (with git-remote-https) for the allowed paths.
# bin/agent-rootfs holds the three binaries, /bin/busybox and its applet links, curl, git and the
# shared libraries ldd lists for them (the dynamic loader included), /etc/passwd, /tmp.
FROM scratch AS agent
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-agent" \
      org.opencontainers.image.description="SHarness demo agent: confinement self-report and side-door probe" \
      ai.sharness.component="agent"
COPY bin/agent-rootfs/ /
# git and curl keep their state under HOME; /tmp is the agent's only writable place.
ENV HOME=/tmp
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/sharness-agent"]

# launcher: verifies the policy hash, mints the session CA and one SVID per role, and serves
# each role its SVID over the SPIFFE Workload API.
FROM scratch AS launcher
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-launcher" \
      org.opencontainers.image.description="SHarness launcher: policy hash check, session identities, SPIFFE Workload API" \
      ai.sharness.component="launcher"
COPY bin/sharness-launcher /sharness-launcher
# Its audit log's folder, owned by its user: a new volume mounted there takes it over.
COPY --chown=65530:65530 bin/empty/ /var/log/sharness/
USER 65530:65530
ENTRYPOINT ["/sharness-launcher"]

# net: the only network client of the stack, an allowlisting HTTP forward proxy.
FROM scratch AS net
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-net" \
      org.opencontainers.image.description="SHarness net: the stack's only egress, an allowlisting forward proxy" \
      ai.sharness.component="net"
COPY bin/sharness-net /sharness-net
# Its audit log's and approval gate's folders, owned by its user: a new volume mounted there
# takes them over.
COPY --chown=65531:65531 bin/empty/ /var/log/sharness/
COPY --chown=65531:65531 bin/empty/ /var/lib/sharness/gate/
USER 65531:65531
ENTRYPOINT ["/sharness-net"]

# bash: the agent's shell as an MCP tool; each command runs in a fresh sandbox the server makes.
# bin/bash-rootfs holds /sharness-bash and a Debian userland (bash, coreutils, git, curl, make,
# strace, ...) with its libraries, copied by hack/build-images.sh. Runs as the workspace's uid.
FROM scratch AS bash
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-bash" \
      org.opencontainers.image.description="SHarness bash: a fresh sandbox per shell command, as an MCP tool" \
      ai.sharness.component="bash"
COPY bin/bash-rootfs/ /
ENV HOME=/tmp
# Its audit log's and approval gate's folders, owned by its user: a new volume mounted there
# takes them over.
COPY --chown=65532:65532 bin/empty/ /var/log/sharness/
COPY --chown=65532:65532 bin/empty/ /var/lib/sharness/gate/
USER 65532:65532
ENTRYPOINT ["/sharness-bash"]

# fs: the only writer of the workspace's protected paths, under content rules.
FROM scratch AS fs
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-fs" \
      org.opencontainers.image.description="SHarness fs: the only writer of the workspace's protected paths" \
      ai.sharness.component="fs"
COPY bin/sharness-fs /sharness-fs
# Its audit log's and approval gate's folders, owned by its user: a new volume mounted there
# takes them over.
COPY --chown=65532:65532 bin/empty/ /var/log/sharness/
COPY --chown=65532:65532 bin/empty/ /var/lib/sharness/gate/
USER 65532:65532
ENTRYPOINT ["/sharness-fs"]

# world: the offline "outside world" of the demo and the e2e suite (DNS, HTTPS with a throwaway
# CA, a git repository, a redirector, echo). Test infrastructure, not a component: it never
# runs in a real stack. Its TLS leaf comes by environment (testkit/worldca).
FROM scratch AS world
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-world" \
      org.opencontainers.image.description="SHarness test world: offline DNS, HTTPS, git and echo servers for the demo and e2e suite" \
      ai.sharness.test-fixture="world"
COPY bin/world-rootfs/ /
USER 65520:65520
ENTRYPOINT ["/sharness-world"]

# llm: the Messages API proxy, the stack's only model client. It carries Debian's CA bundle for
# the real API; it has no key of its own.
FROM scratch AS llm
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-llm" \
      org.opencontainers.image.description="SHarness llm: Messages API proxy with a secret filter; the real key comes sealed from kms" \
      ai.sharness.component="llm"
COPY bin/llm-rootfs/ /
# Its audit log's folder, owned by its user: a new volume mounted there takes it over.
COPY --chown=65533:65533 bin/empty/ /var/log/sharness/
USER 65533:65533
ENTRYPOINT ["/sharness-llm"]

# kms: custody. Its session identity is made at start and never leaves it; sealed secrets are
# mounted read-only at run time, never built in.
FROM scratch AS kms
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-kms" \
      org.opencontainers.image.description="SHarness kms: opens sealed secrets, re-seals them to one-time keys" \
      ai.sharness.component="kms"
COPY bin/sharness-kms /sharness-kms
# Its audit log's and approval gate's folders, owned by its user: a new volume mounted there
# takes them over.
COPY --chown=65529:65529 bin/empty/ /var/log/sharness/
COPY --chown=65529:65529 bin/empty/ /var/lib/sharness/gate/
USER 65529:65529
ENTRYPOINT ["/sharness-kms"]

# model: the offline Messages API that stands in for the real one in the demo and the e2e suite,
# recording what reached it. Test infrastructure, like world.
FROM scratch AS model
ARG VERSION=dev
ARG SOURCE=https://github.com/sharness-ai/sharness
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.title="sharness-model" \
      org.opencontainers.image.description="SHarness offline model: a scripted Messages API that records what it receives" \
      ai.sharness.test-fixture="model"
COPY bin/sharness-model /sharness-model
USER 65519:65519
ENTRYPOINT ["/sharness-model"]
