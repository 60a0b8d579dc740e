// The Pod Security Standards, check by check: each row is a pod, the level it is evaluated at,
// and the violations kube-apiserver would name (reason and detail, word for word).
import { describe, expect, it } from "vitest"
import * as PodSecurity from "../../src/policy/PodSecurityStandards.js"

type Spec = Record<string, unknown>
const restrictedContext = { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" }, capabilities: { drop: ["ALL"] } }
/** A pod with one container `c`, its securityContext merged with `sc`, and the spec merged with `spec`. */
const pod = (spec: Spec = {}, sc: Record<string, unknown> = {}, annotations?: Record<string, string>): PodSecurity.PodView => ({
  ...(annotations === undefined ? {} : { metadata: { annotations } }),
  spec: { containers: [{ name: "c", image: "nginx", securityContext: sc }], ...spec }
})
/** A pod that passes `restricted`, with its container's securityContext changed by `sc`. */
const compliant = (sc: Record<string, unknown> = {}, spec: Spec = {}) => pod(spec, { ...restrictedContext, ...sc })
const container = (name: string, sc: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({ name, image: "nginx", securityContext: { ...restrictedContext, ...sc }, ...extra })

const cases: ReadonlyArray<[string, PodSecurity.Level, PodSecurity.PodView, ReadonlyArray<PodSecurity.Violation>]> = [
  // privileged allows anything.
  ["privileged admits a privileged hostPath pod", "privileged", pod({ hostNetwork: true, volumes: [{ name: "root", hostPath: { path: "/" } }] }, { privileged: true }), []],
  ["baseline admits a plain pod", "baseline", pod(), []],
  ["restricted admits a compliant pod", "restricted", compliant(), []],
  // hostNamespaces
  ["hostNetwork", "baseline", pod({ hostNetwork: true }), [{ reason: "host namespaces", detail: "hostNetwork=true" }]],
  ["hostPID and hostIPC", "baseline", pod({ hostPID: true, hostIPC: true }), [{ reason: "host namespaces", detail: "hostPID=true, hostIPC=true" }]],
  ["hostNetwork false is fine", "baseline", pod({ hostNetwork: false }), []],
  // privileged
  ["privileged container", "baseline", pod({}, { privileged: true }), [{ reason: "privileged", detail: 'container "c" must not set securityContext.privileged=true' }]],
  [
    "privileged init and main containers",
    "baseline",
    pod({ initContainers: [{ name: "i", image: "x", securityContext: { privileged: true } }], containers: [{ name: "c", image: "x", securityContext: { privileged: true } }] }),
    [{ reason: "privileged", detail: 'containers "i", "c" must not set securityContext.privileged=true' }]
  ],
  // capabilities_baseline
  ["baseline capability", "baseline", pod({}, { capabilities: { add: ["NET_BIND_SERVICE", "CHOWN"] } }), []],
  [
    "non-default capabilities",
    "baseline",
    pod({}, { capabilities: { add: ["SYS_ADMIN", "NET_ADMIN", "CHOWN"] } }),
    [{ reason: "non-default capabilities", detail: 'container "c" must not include "NET_ADMIN", "SYS_ADMIN" in securityContext.capabilities.add' }]
  ],
  // hostPathVolumes
  ["hostPath volume", "baseline", pod({ volumes: [{ name: "root", hostPath: { path: "/" } }, { name: "tmp", emptyDir: {} }] }), [{ reason: "hostPath volumes", detail: 'volume "root"' }]],
  [
    "hostPath volumes",
    "baseline",
    pod({ volumes: [{ name: "a", hostPath: { path: "/a" } }, { name: "b", hostPath: { path: "/b" } }] }),
    [{ reason: "hostPath volumes", detail: 'volumes "a", "b"' }]
  ],
  // hostPorts
  ["hostPort", "baseline", pod({ containers: [{ name: "c", image: "x", ports: [{ containerPort: 80, hostPort: 8080 }] }] }), [{ reason: "hostPort", detail: 'container "c" uses hostPort 8080' }]],
  ["containerPort alone", "baseline", pod({ containers: [{ name: "c", image: "x", ports: [{ containerPort: 80 }] }] }), []],
  [
    "hostPorts of two containers",
    "baseline",
    pod({ containers: [{ name: "a", image: "x", ports: [{ hostPort: 81 }] }, { name: "b", image: "x", ports: [{ hostPort: 80 }] }] }),
    [{ reason: "hostPort", detail: 'containers "a", "b" use hostPorts 80, 81' }]
  ],
  // hostProbesAndHostLifecycle
  [
    "probe host",
    "baseline",
    pod({ containers: [{ name: "c", image: "x", livenessProbe: { httpGet: { host: "10.0.0.1", port: 80 } }, lifecycle: { preStop: { tcpSocket: { host: "metadata", port: 80 } } } }] }),
    [{ reason: "probe or lifecycle host", detail: 'container "c" uses probe or lifecycle hosts "10.0.0.1", "metadata"' }]
  ],
  // appArmorProfile
  ["AppArmor RuntimeDefault", "baseline", pod({ securityContext: { appArmorProfile: { type: "RuntimeDefault" } } }, { appArmorProfile: { type: "Localhost" } }), []],
  [
    "AppArmor Unconfined on pod and container",
    "baseline",
    pod({ securityContext: { appArmorProfile: { type: "Unconfined" } } }, { appArmorProfile: { type: "Unconfined" } }),
    [{ reason: "forbidden AppArmor profile", detail: 'pod and container "c" must not set AppArmor profile type to "Unconfined"' }]
  ],
  [
    "AppArmor annotation unconfined",
    "baseline",
    pod({}, {}, { "container.apparmor.security.beta.kubernetes.io/c": "unconfined" }),
    [{ reason: "forbidden AppArmor profile", detail: 'annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/c="unconfined""' }]
  ],
  // seLinuxOptions
  ["SELinux container_t", "baseline", pod({}, { seLinuxOptions: { type: "container_t", level: "s0:c1" } }), []],
  [
    "SELinux type, user and role",
    "baseline",
    pod({ securityContext: { seLinuxOptions: { type: "spc_t" } } }, { seLinuxOptions: { user: "root", role: "sysadm_r" } }),
    [{ reason: "seLinuxOptions", detail: 'pod and container "c" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set' }]
  ],
  // procMount
  ["procMount Default", "baseline", pod({}, { procMount: "Default" }), []],
  ["procMount Unmasked", "baseline", pod({}, { procMount: "Unmasked" }), [{ reason: "procMount", detail: 'container "c" must not set securityContext.procMount to "Unmasked"' }]],
  // seccompProfile_baseline
  ["seccomp unset at baseline", "baseline", pod(), []],
  [
    "seccomp Unconfined",
    "baseline",
    pod({ securityContext: { seccompProfile: { type: "Unconfined" } } }),
    [{ reason: "seccompProfile", detail: 'pod must not set securityContext.seccompProfile.type to "Unconfined"' }]
  ],
  [
    "seccomp annotation unconfined",
    "baseline",
    pod({}, {}, { "seccomp.security.alpha.kubernetes.io/pod": "unconfined" }),
    [{ reason: "seccompProfile", detail: 'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"' }]
  ],
  // sysctls
  ["safe sysctl", "baseline", pod({ securityContext: { sysctls: [{ name: "net.ipv4.ip_local_port_range", value: "1024 65535" }] } }), []],
  [
    "unsafe sysctls",
    "baseline",
    pod({ securityContext: { sysctls: [{ name: "kernel.msgmax", value: "1" }, { name: "net.core.somaxconn", value: "1" }] } }),
    [{ reason: "forbidden sysctls", detail: "kernel.msgmax, net.core.somaxconn" }]
  ],
  // windowsHostProcess
  [
    "hostProcess",
    "baseline",
    pod({ securityContext: { windowsOptions: { hostProcess: true } } }),
    [{ reason: "hostProcess", detail: "pod must not set securityContext.windowsOptions.hostProcess=true" }]
  ],
  // allowPrivilegeEscalation
  [
    "allowPrivilegeEscalation unset",
    "restricted",
    compliant({ allowPrivilegeEscalation: undefined }),
    [{ reason: "allowPrivilegeEscalation != false", detail: 'container "c" must set securityContext.allowPrivilegeEscalation=false' }]
  ],
  [
    "allowPrivilegeEscalation true",
    "restricted",
    compliant({ allowPrivilegeEscalation: true }),
    [{ reason: "allowPrivilegeEscalation != false", detail: 'container "c" must set securityContext.allowPrivilegeEscalation=false' }]
  ],
  // capabilities_restricted (replaces capabilities_baseline)
  [
    "capabilities not dropped",
    "restricted",
    compliant({ capabilities: { drop: ["NET_RAW"] } }),
    [{ reason: "unrestricted capabilities", detail: 'container "c" must set securityContext.capabilities.drop=["ALL"]' }]
  ],
  ["NET_BIND_SERVICE added", "restricted", compliant({ capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] } }), []],
  [
    "CHOWN added (baseline's) is restricted's violation, reported once",
    "restricted",
    compliant({ capabilities: { drop: ["ALL"], add: ["CHOWN", "SYS_ADMIN"] } }),
    [{ reason: "unrestricted capabilities", detail: 'container "c" must not include "CHOWN", "SYS_ADMIN" in securityContext.capabilities.add' }]
  ],
  // restrictedVolumes (replaces hostPathVolumes)
  [
    "volumes allowed at restricted",
    "restricted",
    compliant({}, { volumes: [{ name: "a", configMap: { name: "x" } }, { name: "b", secret: { secretName: "y" } }, { name: "c", emptyDir: {} }, { name: "d", projected: {} }, { name: "e", downwardAPI: {} }, { name: "f", persistentVolumeClaim: { claimName: "z" } }, { name: "g" }] }),
    []
  ],
  [
    "hostPath at restricted",
    "restricted",
    compliant({}, { volumes: [{ name: "root", hostPath: { path: "/" } }] }),
    [{ reason: "restricted volume types", detail: 'volume "root" uses restricted volume type "hostPath"' }]
  ],
  [
    "two restricted volume types",
    "restricted",
    compliant({}, { volumes: [{ name: "a", hostPath: { path: "/" } }, { name: "b", nfs: { server: "s", path: "/" } }] }),
    [{ reason: "restricted volume types", detail: 'volumes "a", "b" use restricted volume types "hostPath", "nfs"' }]
  ],
  // runAsNonRoot
  ["runAsNonRoot on the pod", "restricted", compliant({ runAsNonRoot: undefined }, { securityContext: { runAsNonRoot: true } }), []],
  [
    "runAsNonRoot unset",
    "restricted",
    compliant({ runAsNonRoot: undefined }),
    [{ reason: "runAsNonRoot != true", detail: 'pod or container "c" must set securityContext.runAsNonRoot=true' }]
  ],
  [
    "runAsNonRoot false",
    "restricted",
    compliant({ runAsNonRoot: false }, { securityContext: { runAsNonRoot: false } }),
    [{ reason: "runAsNonRoot != true", detail: 'pod and container "c" must not set securityContext.runAsNonRoot=false' }]
  ],
  // runAsUser
  ["runAsUser 1000", "restricted", compliant({ runAsUser: 1000 }), []],
  ["runAsUser 0", "restricted", compliant({ runAsUser: 0 }, { securityContext: { runAsUser: 0 } }), [{ reason: "runAsUser=0", detail: 'pod and container "c" must not set runAsUser=0' }]],
  // seccompProfile_restricted (replaces seccompProfile_baseline)
  ["seccomp on the pod", "restricted", compliant({ seccompProfile: undefined }, { securityContext: { seccompProfile: { type: "Localhost", localhostProfile: "p.json" } } }), []],
  [
    "seccomp unset",
    "restricted",
    compliant({ seccompProfile: undefined }),
    [{ reason: "seccompProfile", detail: 'pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"' }]
  ],
  [
    "seccomp Unconfined on a container",
    "restricted",
    compliant({ seccompProfile: { type: "Unconfined" } }),
    [{ reason: "seccompProfile", detail: 'container "c" must not set securityContext.seccompProfile.type to "Unconfined"' }]
  ],
  // Restricted includes baseline.
  ["restricted still refuses hostNetwork", "restricted", compliant({}, { hostNetwork: true }), [{ reason: "host namespaces", detail: "hostNetwork=true" }]]
]

describe("the Pod Security Standards", () => {
  it.each(cases)("%s (%s)", (_, level, p, expected) => {
    expect(PodSecurity.evaluate(PodSecurity.latest(level), p)).toEqual(expected)
  })

  it("names every restricted violation of a bare pod, in kube's order", () => {
    const found = PodSecurity.evaluate(PodSecurity.latest("restricted"), pod({ containers: [{ name: "c", image: "nginx" }] }))
    expect(PodSecurity.formatViolations(found)).toBe(
      'allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ' +
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )
  })

  it("covers every check with at least one failing row", () => {
    const failing = new Set<string>()
    for (const [, level, p] of cases) {
      for (const check of PodSecurity.checksOf(level)) if (check.check(p) !== undefined) failing.add(check.id)
    }
    expect([...failing].sort()).toEqual(PodSecurity.checks.map((c) => c.id).sort())
  })

  it("checks every container kind, and survives shapes decoding would refuse", () => {
    const p = pod({ containers: [container("c")], initContainers: [container("i", { privileged: true })], ephemeralContainers: [container("e", { privileged: true })] })
    expect(PodSecurity.evaluate(PodSecurity.latest("baseline"), p)).toEqual([{ reason: "privileged", detail: 'containers "i", "e" must not set securityContext.privileged=true' }])
    const odd = { spec: { containers: "nope", volumes: [null, 3], securityContext: [] } } as unknown as PodSecurity.PodView
    expect(() => PodSecurity.evaluate(PodSecurity.latest("restricted"), odd)).not.toThrow()
    expect(PodSecurity.evaluate(PodSecurity.latest("restricted"), {})).toEqual([])
  })
})

describe("namespace labels", () => {
  const defaults = PodSecurity.uniform("baseline")
  const cases: ReadonlyArray<[string, Record<string, string>, PodSecurity.Policy, ReadonlyArray<string>]> = [
    ["no labels take the defaults", {}, defaults, []],
    [
      "each mode its own level and version",
      { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.29", "pod-security.kubernetes.io/warn": "privileged" },
      { enforce: { level: "restricted", version: "v1.29" }, audit: PodSecurity.latest("baseline"), warn: PodSecurity.latest("privileged") },
      []
    ],
    [
      "an invalid enforce level fails closed, an invalid warn level open",
      { "pod-security.kubernetes.io/enforce": "strict", "pod-security.kubernetes.io/warn": "loud", "pod-security.kubernetes.io/audit-version": "1.2" },
      { enforce: PodSecurity.latest("restricted"), audit: PodSecurity.latest("baseline"), warn: PodSecurity.latest("privileged") },
      [
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted',
        'metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: "1.2": must be "latest" or "v1.x"',
        'metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "loud": must be one of privileged, baseline, restricted'
      ]
    ]
  ]
  it.each(cases)("%s", (_, labels, policy, errors) => {
    const got = PodSecurity.policyOf(labels, defaults)
    expect(got.policy).toEqual(policy)
    expect(got.errors.map((e) => `${e.path}: ${e.message}`)).toEqual(errors)
  })

  it("accepts latest and v1.N versions only", () => {
    expect(["latest", "v1.0", "v1.29", "v1.100"].every(PodSecurity.isVersion)).toBe(true)
    expect(["v1.01", "v2.0", "1.29", "v1.", "LATEST", ""].some(PodSecurity.isVersion)).toBe(false)
  })
})
