// PodSecurity admission inside a real (in-process) API server with the default chain: enforce,
// warn and audit by namespace label, workload templates, exemptions, customer namespaces,
// namespace label validation and the warnings a tighter enforce level gives.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AdmissionPlugins from "../../src/admission/index.js"
import * as ApiServer from "../../src/api/ApiServer.js"
import * as Authn from "../../src/api/Authn.js"
import * as PodSecurity from "../../src/policy/PodSecurityStandards.js"
import { makeMemory } from "../../src/store/Store.js"
import { namespace, userOf } from "./harness.js"

interface Reply {
  readonly status: number
  readonly body: any
  readonly warnings: ReadonlyArray<string>
}

/** kube's `299 - "…"` warning values (client-go's parser, for the quoted texts Fleet writes). */
const parseWarnings = (header: string | undefined): ReadonlyArray<string> =>
  header === undefined ? [] : [...header.matchAll(/299 - ("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!) as string)

const run = <A>(options: Omit<AdmissionPlugins.Options, "store" | "region">, body: (call: (method: string, path: string, body?: unknown, token?: string) => Promise<Reply>, audit: Array<ApiServer.AuditRecord>) => Promise<A>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const store = makeMemory()
        const audit: Array<ApiServer.AuditRecord> = []
        const admission = yield* AdmissionPlugins.make({ store, region: "local", ...options })
        const server = yield* ApiServer.make({
          store,
          authenticate: (headers) => Effect.succeed(userOf(Authn.bearer(headers) ?? "anonymous")),
          admission,
          audit: (r) => audit.push(r)
        })
        const call = (method: string, path: string, b?: unknown, token = "admin") => {
          const [p, q] = path.split("?")
          return Effect.runPromise(
            server.handle({
              method,
              path: p!,
              query: new URLSearchParams(q ?? ""),
              headers: { "content-type": method !== "PATCH" ? "application/json" : Array.isArray(b) ? "application/json-patch+json" : "application/merge-patch+json", authorization: `Bearer ${token}` },
              body: b === undefined ? undefined : new TextEncoder().encode(JSON.stringify(b)),
              client: token
            })
          ).then((r) => {
            // What a header may hold: printable ASCII (node:http refuses anything else).
            expect(r.headers["warning"] ?? "").toMatch(/^[\x20-\x7e]*$/)
            return { status: r.status, body: r._tag === "Json" ? (r.body as any) : undefined, warnings: parseWarnings(r.headers["warning"]) }
          })
        }
        return yield* Effect.promise(() => body(call, audit))
      })
    )
  )

const restrictedContext = { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" }, capabilities: { drop: ["ALL"] } }
const pod = (name: string, spec: Record<string, unknown> = {}, sc: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "c", image: "nginx", securityContext: sc }], ...spec }
})
const good = (name: string) => pod(name, {}, restrictedContext)
const deployment = (name: string, podSpec: Record<string, unknown>) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: { selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: podSpec } }
})
const enforce = (level: string) => ({ "pod-security.kubernetes.io/enforce": level })

describe("PodSecurity admission", () => {
  it("enforces the namespace's level on pods, with kube's message", () =>
    run({}, async (call) => {
      expect((await call("POST", "/api/v1/namespaces", namespace("strict", enforce("restricted")))).status).toBe(201)
      const refused = await call("POST", "/api/v1/namespaces/strict/pods", pod("web", { hostNetwork: true }))
      expect(refused.status).toBe(403)
      expect(refused.body).toMatchObject({ kind: "Status", reason: "Forbidden", details: { name: "web", kind: "pods" } })
      expect(refused.body.message).toBe(
        'pods "web" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true), ' +
          'allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ' +
          'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ' +
          'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ' +
          'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
      )
      expect(refused.warnings).toEqual([])
      expect((await call("POST", "/api/v1/namespaces/strict/pods", good("ok"))).status).toBe(201)
      // Unlabelled namespaces take the server's default: privileged here (kube-apiserver's).
      expect((await call("POST", "/api/v1/namespaces", namespace("open"))).status).toBe(201)
      expect((await call("POST", "/api/v1/namespaces/open/pods", pod("root", { volumes: [{ name: "root", hostPath: { path: "/" } }] }, { privileged: true }))).status).toBe(201)
    }))

  it("leaves status writes alone and checks spec updates", () =>
    run({}, async (call) => {
      await call("POST", "/api/v1/namespaces", namespace("team"))
      expect((await call("POST", "/api/v1/namespaces/team/pods", pod("p", {}, { privileged: true }))).status).toBe(201)
      expect((await call("PATCH", "/api/v1/namespaces/team", { metadata: { labels: enforce("baseline") } })).status).toBe(200)
      // The pod now violates its namespace's level, yet its node may still report its status.
      expect((await call("PATCH", "/api/v1/namespaces/team/pods/p/status", { status: { phase: "Running" } })).status).toBe(200)
      expect((await call("PATCH", "/api/v1/namespaces/team/pods/p", { metadata: { labels: { a: "b" } } })).status).toBe(200)
      const image = await call("PATCH", "/api/v1/namespaces/team/pods/p", [{ op: "replace", path: "/spec/containers/0/image", value: "nginx:2" }])
      expect(image.status).toBe(403)
      expect(image.body.message).toContain('violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)')
    }))

  it("warns (Warning headers) and audits by label, and never refuses a workload's template", () =>
    run({}, async (call, audit) => {
      await call("POST", "/api/v1/namespaces", namespace("soft", { "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "baseline", "pod-security.kubernetes.io/audit-version": "v1.29" }))
      const p = await call("POST", "/api/v1/namespaces/soft/pods", pod("p", { hostPID: true }))
      expect(p.status).toBe(201)
      expect(p.warnings).toEqual([expect.stringMatching(/^would violate PodSecurity "restricted:latest": host namespaces \(hostPID=true\), allowPrivilegeEscalation != false/)])
      // A create's audit record names no object (its URL is the collection's).
      expect(audit.filter((r) => r.resource === "pods" && r.verb === "create").map((r) => r.annotations)).toEqual([{
        "pod-security.kubernetes.io/enforce-policy": "privileged:latest",
        "pod-security.kubernetes.io/audit-violations": 'would violate PodSecurity "baseline:v1.29": host namespaces (hostPID=true)'
      }])
      const d = await call("POST", "/apis/apps/v1/namespaces/soft/deployments", deployment("d", { containers: [{ name: "c", image: "nginx", securityContext: { privileged: true } }] }))
      expect(d.status).toBe(201)
      expect(d.warnings).toEqual([expect.stringMatching(/^would violate PodSecurity "restricted:latest": privileged \(container "c" must not set securityContext.privileged=true\)/)])
      // A warning quotes what the client sent, escaped for the header and read back whole.
      const odd = await call("POST", "/api/v1/namespaces/soft/pods", pod("odd", { securityContext: { sysctls: [{ name: "kernel.é\u2028😀", value: "1" }] } }, { allowPrivilegeEscalation: false }))
      expect(odd.status).toBe(201)
      expect(odd.warnings[0]).toContain("forbidden sysctls (kernel.é\u2028😀)")
      // The same holds for the API's own warnings (an unknown field's name, fieldValidation=Warn).
      const unknown = await call("POST", "/api/v1/namespaces/soft/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "u" }, "😀": 1 })
      expect(unknown.status).toBe(201)
      expect(unknown.warnings).toEqual(['unknown field "[😀]"'])
      // An enforce=restricted namespace still takes the Deployment; only its pods are refused.
      await call("POST", "/api/v1/namespaces", namespace("hard", enforce("restricted")))
      expect((await call("POST", "/apis/apps/v1/namespaces/hard/deployments", deployment("d", { containers: [{ name: "c", image: "nginx", securityContext: { privileged: true } }] }))).status).toBe(201)
      const job = { apiVersion: "batch/v1", kind: "CronJob", metadata: { name: "cj" }, spec: { schedule: "* * * * *", jobTemplate: { spec: { template: { spec: { restartPolicy: "Never", hostNetwork: true, containers: [{ name: "c", image: "x" }] } } } } } }
      const cj = await call("POST", "/apis/batch/v1/namespaces/soft/cronjobs", job)
      expect(cj.status).toBe(201)
      expect(cj.warnings[0]).toMatch(/^would violate PodSecurity "restricted:latest": host namespaces \(hostNetwork=true\)/)
    }))

  it("refuses invalid labels, and warns about existing pods when enforce tightens", () =>
    run({}, async (call) => {
      const bad = await call("POST", "/api/v1/namespaces", namespace("x", { "pod-security.kubernetes.io/enforce": "strict" }))
      expect(bad.status).toBe(422)
      expect(bad.body.message).toBe('Namespace "x" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted')
      await call("POST", "/api/v1/namespaces", namespace("team"))
      for (const name of ["a", "b", "c"]) await call("POST", "/api/v1/namespaces/team/pods", pod(name, { hostNetwork: true }))
      await call("POST", "/api/v1/namespaces/team/pods", pod("d", {}, { privileged: true }))
      await call("POST", "/api/v1/namespaces/team/pods", good("fine"))
      const tightened = await call("PATCH", "/api/v1/namespaces/team", { metadata: { labels: enforce("baseline") } })
      expect(tightened.status).toBe(200)
      expect(tightened.warnings).toEqual([
        'existing pods in namespace "team" violate the new PodSecurity enforce level "baseline:latest"',
        "a (and 2 other pods): host namespaces",
        "d: privileged"
      ])
      expect((await call("PATCH", "/api/v1/namespaces/team", { metadata: { labels: { "pod-security.kubernetes.io/enforce-version": "v1" } } })).status).toBe(422)
    }))

  it("exempts users, namespaces and runtime classes", () =>
    run({ podSecurity: { defaults: PodSecurity.uniform("restricted"), exemptions: { usernames: ["ci"], namespaces: ["infra"], runtimeClasses: ["kata"] } } }, async (call, audit) => {
      for (const ns of ["infra", "apps"]) await call("POST", "/api/v1/namespaces", namespace(ns))
      expect((await call("POST", "/api/v1/namespaces/infra/pods", pod("a", { hostNetwork: true }))).status).toBe(201)
      expect((await call("POST", "/api/v1/namespaces/apps/pods", pod("b", { hostNetwork: true }))).status).toBe(403)
      expect((await call("POST", "/api/v1/namespaces/apps/pods", pod("c", { runtimeClassName: "kata" }))).status).toBe(201)
      expect((await call("POST", "/api/v1/namespaces/apps/pods", pod("d", { hostNetwork: true }), "ci")).status).toBe(201)
      expect(audit.filter((r) => r.resource === "pods").map((r) => [r.namespace, r.code, r.annotations])).toEqual([
        ["infra", 201, { "pod-security.kubernetes.io/exempt": "namespace" }],
        ["apps", 403, expect.objectContaining({ "pod-security.kubernetes.io/enforce-policy": "restricted:latest" })],
        ["apps", 201, { "pod-security.kubernetes.io/exempt": "runtimeClass" }],
        ["apps", 201, { "pod-security.kubernetes.io/exempt": "user" }]
      ])
    }))

  it("gives customer namespaces restricted unless an administrator labels them, and labels namespaces non-administrators create", () =>
    run({}, async (call) => {
      await call("POST", "/api/v1/namespaces", namespace("shop"))
      const binding = { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "customer" }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "fleet:customer" }, subjects: [{ kind: "User", name: "alice" }] }
      expect((await call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings", binding)).status).toBe(201)
      const refused = await call("POST", "/api/v1/namespaces/shop/pods", pod("p"))
      expect(refused.status).toBe(403)
      expect(refused.body.message).toContain('violates PodSecurity "restricted:latest"')
      expect((await call("POST", "/api/v1/namespaces/shop/pods", good("q"))).status).toBe(201)
      // The administrator says otherwise.
      expect((await call("PATCH", "/api/v1/namespaces/shop", { metadata: { labels: enforce("baseline") } })).status).toBe(200)
      expect((await call("POST", "/api/v1/namespaces/shop/pods", pod("p"))).status).toBe(201)
      // A namespace created by someone other than an administrator enforces restricted.
      const made = await call("POST", "/api/v1/namespaces", namespace("self-service"), "bob")
      expect(made.status).toBe(201)
      expect(made.body.metadata.labels["pod-security.kubernetes.io/enforce"]).toBe("restricted")
      const chosen = await call("POST", "/api/v1/namespaces", namespace("chosen", { "pod-security.kubernetes.io/warn": "baseline" }), "bob")
      expect(chosen.body.metadata.labels["pod-security.kubernetes.io/enforce"]).toBe("restricted")
      const explicit = await call("POST", "/api/v1/namespaces", namespace("explicit", enforce("baseline")), "bob")
      expect(explicit.body.metadata.labels["pod-security.kubernetes.io/enforce"]).toBe("baseline")
    }))
})
