import { Either, Option } from "effect"
import { describe, expect, it } from "vitest"
import { Apps, Decode, Kinds, Pod } from "../../src/model/index.js"

// Objects as `kubectl get -o yaml` prints them (written as JS), one per kind.
const namespace = {
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: "team-a", labels: { "kubernetes.io/metadata.name": "team-a" }, creationTimestamp: "2024-05-01T10:00:00Z" },
  spec: { finalizers: ["kubernetes"] },
  status: { phase: "Active" }
}

const node = {
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: "node-1", labels: { "kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "a" } },
  spec: {
    podCIDR: "10.244.1.0/24",
    podCIDRs: ["10.244.1.0/24"],
    providerID: "kbox://node-1",
    taints: [{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }],
    unschedulable: false
  },
  status: {
    capacity: { cpu: "4", memory: "16374236Ki", pods: "110", "ephemeral-storage": "61202244Ki" },
    allocatable: { cpu: "3800m", memory: "15747548Ki", pods: 110 },
    conditions: [
      {
        type: "Ready",
        status: "True",
        lastHeartbeatTime: "2024-05-01T10:00:00Z",
        lastTransitionTime: "2024-05-01T09:00:00Z",
        reason: "KubeletReady",
        message: "kubelet is posting ready status"
      },
      { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory" }
    ],
    addresses: [
      { type: "InternalIP", address: "192.168.1.10" },
      { type: "Hostname", address: "node-1" }
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    nodeInfo: {
      machineID: "m",
      systemUUID: "s",
      bootID: "b",
      kernelVersion: "6.1.0",
      osImage: "Debian GNU/Linux 12",
      containerRuntimeVersion: "kbox://1.0",
      kubeletVersion: "v1.30.0",
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: "amd64"
    },
    images: [{ names: ["docker.io/library/nginx:1.27"], sizeBytes: 67000000 }]
  }
}

const pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "web-7d4b9c-abcde",
    generateName: "web-7d4b9c-",
    namespace: "default",
    labels: { app: "web", "pod-template-hash": "7d4b9c" },
    ownerReferences: [
      { apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-7d4b9c", uid: "rs-uid", controller: true, blockOwnerDeletion: true }
    ]
  },
  spec: {
    initContainers: [{ name: "init", image: "busybox:1.36", command: ["sh", "-c", "echo init"] }],
    containers: [
      {
        name: "web",
        image: "nginx:1.27",
        imagePullPolicy: "IfNotPresent",
        command: ["nginx"],
        args: ["-g", "daemon off;"],
        workingDir: "/usr/share/nginx",
        ports: [{ name: "http", containerPort: 80, protocol: "TCP" }],
        env: [
          { name: "MODE", value: "prod" },
          { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
          { name: "CFG", valueFrom: { configMapKeyRef: { name: "cfg", key: "mode", optional: true } } },
          { name: "PW", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
          { name: "MEM", valueFrom: { resourceFieldRef: { containerName: "web", resource: "limits.memory", divisor: "1Mi" } } }
        ],
        envFrom: [{ prefix: "APP_", configMapRef: { name: "cfg" } }, { secretRef: { name: "creds", optional: false } }],
        resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: 1, memory: "256Mi" } },
        livenessProbe: { httpGet: { path: "/healthz", port: "http", scheme: "HTTP" }, initialDelaySeconds: 5, periodSeconds: 10 },
        readinessProbe: { tcpSocket: { port: 80 }, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
        startupProbe: { exec: { command: ["cat", "/tmp/ready"] }, failureThreshold: 30 },
        lifecycle: { preStop: { sleep: { seconds: 5 } }, postStart: { exec: { command: ["true"] } } },
        volumeMounts: [
          { name: "data", mountPath: "/data" },
          { name: "cfg", mountPath: "/etc/cfg", readOnly: true, subPath: "app.conf" }
        ],
        securityContext: { runAsNonRoot: true, runAsUser: 1000, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        terminationMessagePath: "/dev/termination-log",
        terminationMessagePolicy: "File",
        stdin: false,
        tty: false
      }
    ],
    volumes: [
      { name: "data", emptyDir: { sizeLimit: "1Gi" } },
      { name: "cfg", configMap: { name: "cfg", items: [{ key: "app.conf", path: "app.conf" }], defaultMode: 420 } },
      { name: "creds", secret: { secretName: "creds" } },
      { name: "host", hostPath: { path: "/var/log", type: "Directory" } },
      { name: "pvc", persistentVolumeClaim: { claimName: "data-0" } },
      {
        name: "kube-api-access",
        projected: {
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
            { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
            { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } }
          ],
          defaultMode: 420
        }
      }
    ],
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    serviceAccountName: "default",
    nodeName: "node-1",
    nodeSelector: { "kubernetes.io/os": "linux" },
    hostname: "web",
    subdomain: "web-svc",
    schedulerName: "default-scheduler",
    priority: 0,
    priorityClassName: "normal",
    hostNetwork: false,
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            {
              matchExpressions: [{ key: "topology.kubernetes.io/zone", operator: "In", values: ["a", "b"] }],
              matchFields: [{ key: "metadata.name", operator: "NotIn", values: ["node-9"] }]
            }
          ]
        },
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 10, preference: { matchExpressions: [{ key: "disk", operator: "Exists" }] } }
        ]
      },
      podAntiAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            podAffinityTerm: { labelSelector: { matchLabels: { app: "web" } }, topologyKey: "kubernetes.io/hostname" }
          }
        ]
      },
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchExpressions: [{ key: "app", operator: "In", values: ["cache"] }] }, topologyKey: "topology.kubernetes.io/zone", namespaces: ["default"] }
        ]
      }
    },
    tolerations: [
      { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
      { key: "dedicated", operator: "Equal", value: "web", effect: "NoSchedule" }
    ],
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: { app: "web" } } }
    ]
  },
  status: {
    phase: "Running",
    conditions: [
      { type: "PodScheduled", status: "True", lastProbeTime: null, lastTransitionTime: "2024-05-01T10:00:00Z" },
      { type: "Ready", status: "True", lastProbeTime: null, lastTransitionTime: "2024-05-01T10:00:05Z" }
    ],
    hostIP: "192.168.1.10",
    hostIPs: [{ ip: "192.168.1.10" }],
    podIP: "10.244.1.7",
    podIPs: [{ ip: "10.244.1.7" }],
    startTime: "2024-05-01T10:00:00Z",
    qosClass: "Burstable",
    initContainerStatuses: [
      {
        name: "init",
        state: {
          terminated: {
            exitCode: 0,
            reason: "Completed",
            startedAt: "2024-05-01T10:00:01Z",
            finishedAt: "2024-05-01T10:00:02Z",
            containerID: "kbox://1"
          }
        },
        lastState: {},
        ready: true,
        restartCount: 0,
        image: "busybox:1.36",
        imageID: "sha256:abc",
        containerID: "kbox://1"
      }
    ],
    containerStatuses: [
      {
        name: "web",
        state: { running: { startedAt: "2024-05-01T10:00:03Z" } },
        lastState: { terminated: { exitCode: 137, signal: 9, reason: "OOMKilled", finishedAt: "2024-05-01T09:59:00Z" } },
        ready: true,
        restartCount: 1,
        image: "nginx:1.27",
        imageID: "sha256:def",
        containerID: "kbox://2",
        started: true
      }
    ]
  }
}

const configMap = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: "default" },
  data: { "app.conf": "mode=prod\n", MODE: "prod" },
  binaryData: { "logo.png": "iVBORw0KGgo=" },
  immutable: false
}

const secret = {
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: "creds", namespace: "default" },
  type: "Opaque",
  data: { password: "c2VjcmV0", username: "YWRtaW4=" },
  stringData: { extra: "plain" }
}

const service = {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "default" },
  spec: {
    type: "NodePort",
    selector: { app: "web" },
    ports: [
      { name: "http", protocol: "TCP", port: 80, targetPort: "http", nodePort: 30080 },
      { name: "metrics", port: 9090, targetPort: 9090 }
    ],
    clusterIP: "10.96.0.10",
    clusterIPs: ["10.96.0.10"],
    sessionAffinity: "None",
    ipFamilies: ["IPv4"],
    ipFamilyPolicy: "SingleStack",
    externalTrafficPolicy: "Cluster",
    internalTrafficPolicy: "Cluster",
    publishNotReadyAddresses: false
  },
  status: { loadBalancer: {} }
}

const loadBalancer = {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "edge" },
  spec: { type: "LoadBalancer", ports: [{ port: 443 }] },
  status: { loadBalancer: { ingress: [{ ip: "203.0.113.7" }] } }
}

const externalName = {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "db" },
  spec: { type: "ExternalName", externalName: "db.example.com" }
}

const endpoints = {
  apiVersion: "v1",
  kind: "Endpoints",
  metadata: { name: "web", namespace: "default" },
  subsets: [
    {
      addresses: [
        { ip: "10.244.1.7", nodeName: "node-1", targetRef: { kind: "Pod", name: "web-7d4b9c-abcde", namespace: "default", uid: "p1" } }
      ],
      notReadyAddresses: [{ ip: "10.244.2.3", hostname: "web-1" }],
      ports: [{ name: "http", port: 80, protocol: "TCP" }]
    }
  ]
}

const event = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web-7d4b9c-abcde.17c1a2b3c4d5e6f7", namespace: "default" },
  involvedObject: { apiVersion: "v1", kind: "Pod", name: "web-7d4b9c-abcde", namespace: "default", uid: "p1", fieldPath: "spec.containers{web}" },
  reason: "Pulled",
  message: 'Container image "nginx:1.27" already present on machine',
  source: { component: "kubelet", host: "node-1" },
  firstTimestamp: "2024-05-01T10:00:02Z",
  lastTimestamp: "2024-05-01T10:05:02Z",
  count: 3,
  type: "Normal",
  eventTime: null,
  reportingComponent: "kubelet",
  reportingInstance: "node-1"
}

const lease = {
  apiVersion: "coordination.k8s.io/v1",
  kind: "Lease",
  metadata: { name: "fleet-controller-manager", namespace: "kube-system" },
  spec: {
    holderIdentity: "cm-1_2f6c1a3e",
    leaseDurationSeconds: 15,
    acquireTime: "2024-05-01T10:00:00.000000Z",
    renewTime: "2024-05-01T10:05:02.123456Z",
    leaseTransitions: 2
  }
}

const template = {
  metadata: { labels: { app: "web" } },
  spec: { containers: [{ name: "web", image: "nginx:1.27", resources: { requests: { cpu: "100m" } } }] }
}

const deployment = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default", generation: 2, annotations: { "deployment.kubernetes.io/revision": "2" } },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "web" } },
    template,
    strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%", maxSurge: 1 } },
    minReadySeconds: 5,
    revisionHistoryLimit: 10,
    paused: false,
    progressDeadlineSeconds: 600
  },
  status: {
    observedGeneration: 2,
    replicas: 3,
    updatedReplicas: 3,
    readyReplicas: 3,
    availableReplicas: 3,
    conditions: [
      {
        type: "Available",
        status: "True",
        lastUpdateTime: "2024-05-01T10:00:00Z",
        lastTransitionTime: "2024-05-01T10:00:00Z",
        reason: "MinimumReplicasAvailable",
        message: "Deployment has minimum availability."
      }
    ]
  }
}

const replicaSet = {
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  metadata: { name: "web-7d4b9c", namespace: "default", labels: { app: "web", "pod-template-hash": "7d4b9c" } },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "web", "pod-template-hash": "7d4b9c" } },
    template: { ...template, metadata: { labels: { app: "web", "pod-template-hash": "7d4b9c" } } },
    minReadySeconds: 5
  },
  status: { replicas: 3, fullyLabeledReplicas: 3, readyReplicas: 3, availableReplicas: 3, observedGeneration: 1 }
}

describe("decoding real objects of every kind (strict: every field is known)", () => {
  it.each([
    ["Namespace", namespace],
    ["Node", node],
    ["Pod", pod],
    ["ConfigMap", configMap],
    ["Secret", secret],
    ["Service", service],
    ["Service", loadBalancer],
    ["Service", externalName],
    ["Endpoints", endpoints],
    ["Event", event],
    ["Lease", lease],
    ["Deployment", deployment],
    ["ReplicaSet", replicaSet]
  ])("%s", (kind, object) => {
    const r = Kinds.decodeAny(object, { strict: true })
    if (Either.isLeft(r)) expect(r.left).toEqual([])
    expect(Either.isRight(r) && r.right.info.kind).toBe(kind)
  })

  it("keeps values as sent except canonical quantities and dropped nulls", () => {
    const r = Decode.decodeObject(Pod.Pod, pod)
    expect(Either.isRight(r)).toBe(true)
    if (Either.isRight(r)) {
      const c = r.right.spec.containers[0]!
      expect(c.resources?.limits).toEqual({ cpu: "1", memory: "256Mi" })
      expect(c.livenessProbe?.httpGet?.port).toBe("http")
      expect(r.right.status?.conditions?.[0]).toEqual({ type: "PodScheduled", status: "True", lastTransitionTime: "2024-05-01T10:00:00Z" })
    }
    const n = Kinds.decodeAny(node)
    expect(Either.isRight(n) && (n.right.object as { status: { allocatable: unknown } }).status.allocatable).toEqual({
      cpu: "3800m",
      memory: "15747548Ki",
      pods: "110"
    })
  })
})

describe("kind-specific validation", () => {
  const bad = (object: unknown) => {
    const r = Kinds.decodeAny(object)
    return Either.isLeft(r) ? r.left.map((e) => `${e.path}: ${e.message}`) : []
  }

  it.each<[string, unknown, string]>([
    ["namespace names are DNS labels", { ...namespace, metadata: { name: "team.a" } }, "metadata.name: Invalid value: \"team.a\""],
    ["service names are DNS-1035 labels", { ...service, metadata: { name: "1web" } }, "metadata.name: Invalid value: \"1web\": a DNS-1035 label"],
    ["service port is required", { ...service, spec: { ports: [{ targetPort: 80 }] } }, "spec.ports[0].port: Required value"],
    ["taint effect", { ...node, spec: { taints: [{ key: "k", effect: "Sometimes" }] } }, 'spec.taints[0].effect: Unsupported value: "Sometimes"'],
    ["secret data is base64", { ...secret, data: { password: "not base64!" } }, 'data[password]: Invalid value: "not base64!": must be valid base64'],
    ["configmap key also in binaryData", { ...configMap, binaryData: { MODE: "cHJvZA==" } }, 'binaryData[MODE]: Invalid value: "MODE": duplicate of key present in data'],
    ["event type", { ...event, type: "Info" }, 'type: Unsupported value: "Info": supported values: "Normal", "Warning"'],
    ["lease renewTime", { ...lease, spec: { renewTime: "now" } }, 'spec.renewTime: Invalid value: "now": must be an RFC3339 timestamp'],
    ["deployment selector required", { ...deployment, spec: { template } }, "spec.selector: Required value"],
    [
      "deployment selector must match template",
      { ...deployment, spec: { selector: { matchLabels: { app: "api" } }, template } },
      'spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` does not match template `labels`'
    ],
    [
      "deployment selector must not be empty",
      { ...deployment, spec: { selector: {}, template } },
      "spec.selector: Invalid value: {}: empty selector is invalid for deployment"
    ],
    [
      "replicaset replicas non-negative",
      { ...replicaSet, spec: { ...replicaSet.spec, replicas: -1 } },
      "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    ],
    ["unknown kind", { apiVersion: "apps/v1", kind: "Pod" }, 'kind: Unsupported value: "Pod": supported values: "Deployment", "ReplicaSet"'],
    ["missing kind", { apiVersion: "v1" }, "kind: Required value"]
  ])("%s", (_name, object, expected) => {
    const errs = bad(object)
    expect(errs.some((e) => e.startsWith(expected)), `${JSON.stringify(errs)} should include ${expected}`).toBe(true)
  })

  it("exports the selector/template check for update validation", () => {
    expect(Apps.validateSelectorMatchesTemplate("deployment", { matchLabels: { app: "x" } }, { spec: template.spec }, "spec")).toEqual([
      { path: "spec.template.metadata.labels", message: "Invalid value: {}: `selector` does not match template `labels`" }
    ])
  })
})

describe("Kinds registry", () => {
  it.each([
    ["v1", "Pod", "pods", true, ["po"]],
    ["v1", "Namespace", "namespaces", false, ["ns"]],
    ["v1", "Node", "nodes", false, ["no"]],
    ["v1", "ConfigMap", "configmaps", true, ["cm"]],
    ["v1", "Secret", "secrets", true, []],
    ["v1", "Service", "services", true, ["svc"]],
    ["v1", "Endpoints", "endpoints", true, ["ep"]],
    ["v1", "Event", "events", true, ["ev"]],
    ["coordination.k8s.io/v1", "Lease", "leases", true, []],
    ["apps/v1", "Deployment", "deployments", true, ["deploy"]],
    ["apps/v1", "ReplicaSet", "replicasets", true, ["rs"]]
  ])("%s %s → %s (namespaced: %s)", (apiVersion, kind, plural, namespaced, shortNames) => {
    const info = Option.getOrThrow(Kinds.kindFor(apiVersion, kind))
    expect(info).toMatchObject({ plural, namespaced, shortNames, listKind: `${kind}List`, singular: kind.toLowerCase() })
    expect(Option.getOrThrow(Kinds.resourceFor(info.group, plural)).kind).toBe(kind)
  })

  it("resolves short and singular names, and only in the right group", () => {
    expect(Option.map(Kinds.resourceFor("apps", "deploy"), (k) => k.kind)).toEqual(Option.some("Deployment"))
    expect(Option.map(Kinds.resourceFor("", "PO"), (k) => k.kind)).toEqual(Option.some("Pod"))
    expect(Option.map(Kinds.resolveName("rs"), (k) => k.apiVersion)).toEqual(Option.some("apps/v1"))
    expect(Option.isNone(Kinds.resourceFor("", "deployments"))).toBe(true)
    expect(Option.isNone(Kinds.kindFor("v1", "Deployment"))).toBe(true)
    expect(Kinds.all.find((k) => k.kind === "Lease")?.group).toBe("coordination.k8s.io")
  })
})
