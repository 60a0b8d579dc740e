import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ContainerIdentity from "../../src/agent/ContainerIdentity.js"
import * as ContainerSpec from "../../src/agent/ContainerSpec.js"
import type * as VolumePlan from "../../src/agent/VolumePlan.js"
import type * as Pod from "../../src/model/Pod.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import type * as Runtime from "../../src/runtime/Runtime.js"

const pod = (container: Partial<Pod.Container>, spec: Partial<Pod.PodSpec> = {}): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "app", image: "node:20", ...container }], ...spec }
})

const lookup: VolumePlan.Lookup = { configMap: () => undefined, secret: () => undefined, claim: () => undefined, volume: () => undefined, token: () => undefined }
const plan: VolumePlan.Plan = { sources: [], mounts: new Map() }
const none = MemoryRuntime.defaultInfo.capabilities
const oci: Runtime.Capabilities = { ...none, isolation: "oci", runAsUser: true }

const context = (o: Partial<ContainerSpec.Context> = {}): ContainerSpec.Context => ({
  hostIP: "10.0.0.1",
  podIP: "10.0.0.1",
  nodeAllocatable: { cpu: "2", memory: "4Gi" },
  defaultEnv: { PATH: "/bin" },
  network: "host",
  sandboxId: "sb-1",
  hostPorts: [],
  capabilities: none,
  ...o
})

const specOf = (p: Pod.Pod, c: ContainerSpec.Context = context(), attempt = 0) => ContainerSpec.make(p, p.spec.containers[0]!, attempt, false, lookup, plan, c)

describe("ContainerSpec", () => {
  interface Case {
    readonly name: string
    readonly pod: Pod.Pod
    readonly context?: ContainerSpec.Context
    readonly expect: Partial<Runtime.ContainerSpec> | { readonly error: RegExp }
  }
  const cases: ReadonlyArray<Case> = [
    { name: "command and args as given", pod: pod({ command: ["node"], args: ["server.js"] }), expect: { command: ["node"], args: ["server.js"], sandboxId: "sb-1", name: "app", attempt: 0 } },
    { name: "without an image runtime, args alone are the command", pod: pod({ args: ["sh", "-c", "true"] }), expect: { command: ["sh", "-c", "true"] } },
    { name: "without an image runtime, no command is an error", pod: pod({}), expect: { error: /has no command to run on this runtime \(memory\)/ } },
    { name: "an OCI runtime runs the image's entrypoint", pod: pod({}), context: context({ capabilities: oci }), expect: { image: "node:20", command: [] } },
    { name: "variables expand in the command", pod: pod({ command: ["echo", "$(GREETING)"], env: [{ name: "GREETING", value: "hi" }] }), expect: { command: ["echo", "hi"] } },
    {
      name: "default env, HOSTNAME, then the pod's own (which win)",
      pod: pod({ command: ["x"], env: [{ name: "PATH", value: "/opt" }] }),
      expect: { env: { PATH: "/opt", HOSTNAME: "web" } }
    },
    { name: "the pod's hostname", pod: pod({ command: ["x"] }, { hostname: "h" }), expect: { env: { PATH: "/bin", HOSTNAME: "h" } } },
    {
      name: "cpu and memory limits and the cpu request",
      pod: pod({ command: ["x"], resources: { limits: { cpu: "500m", memory: "1Mi" }, requests: { cpu: "250m" } } }),
      expect: { resources: { cpuMillis: 500, cpuRequestMillis: 250, memoryBytes: 1_048_576 } }
    },
    { name: "a working directory", pod: pod({ command: ["x"], workingDir: "/app" }), expect: { workingDir: "/app" } }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const spec = specOf(c.pod, c.context)
      if ("error" in c.expect) {
        expect(Either.isLeft(spec) && spec.left).toMatch(c.expect.error)
        return
      }
      expect(Either.isRight(spec)).toBe(true)
      if (Either.isRight(spec)) expect(spec.right).toMatchObject(c.expect)
    })
  }

  it("no resources field without limits; no image without an OCI runtime", () => {
    const spec = Either.getOrThrow(specOf(pod({ command: ["x"] })))
    expect(spec.resources).toBeUndefined()
    expect(spec.image).toBeUndefined()
    expect(spec.args).toBeUndefined()
  })

  it("labels identify the container, with the host ports in host network mode only", () => {
    const hostPorts = [{ containerName: "app", containerPort: 80, protocol: "TCP" as const, hostPort: 31000 }]
    const p = pod({ command: ["x"], ports: [{ containerPort: 80 }] })
    const host = Either.getOrThrow(specOf(p, context({ hostPorts }), 2))
    expect(host.labels?.[ContainerIdentity.Labels.podUid]).toBe("u1")
    expect(host.labels?.[ContainerIdentity.Labels.hostPorts]).not.toBe("")
    expect(host.env?.["PORT"]).toBe("31000")
    expect(host.attempt).toBe(2)
    const own = Either.getOrThrow(specOf(p, context({ hostPorts, network: "pod" })))
    expect(own.labels?.[ContainerIdentity.Labels.hostPorts] ?? "").toBe("")
  })

  it("milli and units read quantities, invalid ones as absent", () => {
    expect([ContainerSpec.milli("1"), ContainerSpec.milli("100m"), ContainerSpec.milli("x"), ContainerSpec.milli(undefined)]).toEqual([1000, 100, undefined, undefined])
    expect([ContainerSpec.units("1Ki"), ContainerSpec.units("1k"), ContainerSpec.units("?"), ContainerSpec.units(undefined)]).toEqual([1024, 1000, undefined, undefined])
  })
})
