/**
 * The `Warning` header parser: every shape the API server (or a proxy in front of it) sends —
 * one value, comma-joined values, several headers, quoted commas and escaped quotes, dates —
 * reads back as the texts kubectl would print, and a malformed value costs only the rest of its
 * own header. Also the typed client, against a real in-process API server over both
 * routes (fetch and transport), hands each warning to `onWarning`, on a create and on a patch.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as AdmissionPlugins from "../../src/admission/index.js"
import * as ApiServer from "../../src/api/ApiServer.js"
import * as Client from "../../src/client/Client.js"
import * as InProcess from "../../src/client/InProcess.js"
import { makeMemory } from "../../src/store/Store.js"
import { userOf } from "../admission/harness.js"
import * as Warnings from "../../src/client/Warnings.js"

describe("Warnings.parse", () => {
  const cases: ReadonlyArray<{ readonly name: string; readonly values: string | ReadonlyArray<string> | null; readonly warnings: ReadonlyArray<Warnings.Warning>; readonly errors?: number }> = [
    { name: "no header", values: null, warnings: [] },
    { name: "an empty header", values: "", warnings: [] },
    { name: "one value", values: '299 - "unknown field \\"spec.foo\\""', warnings: [{ code: 299, agent: "-", text: 'unknown field "spec.foo"' }] },
    {
      name: "comma-joined values, a comma inside a text",
      values: '299 - "would violate PodSecurity \\"restricted:latest\\": privileged (container \\"a\\" must not set privileged=true), allowPrivilegeEscalation != false", 299 - "second"',
      warnings: [
        { code: 299, agent: "-", text: 'would violate PodSecurity "restricted:latest": privileged (container "a" must not set privileged=true), allowPrivilegeEscalation != false' },
        { code: 299, agent: "-", text: "second" }
      ]
    },
    { name: "several headers", values: ['299 - "one"', '299 - "two",299 - "three"'], warnings: [{ code: 299, agent: "-", text: "one" }, { code: 299, agent: "-", text: "two" }, { code: 299, agent: "-", text: "three" }] },
    { name: "an agent with a port and a date", values: '199 proxy.example:8080 "stale" "Wed, 21 Oct 2015 07:28:00 GMT"', warnings: [{ code: 199, agent: "proxy.example:8080", text: "stale", date: "Wed, 21 Oct 2015 07:28:00 GMT" }] },
    { name: "escaped backslash before the closing quote", values: '299 - "path C:\\\\"', warnings: [{ code: 299, agent: "-", text: "path C:\\" }] },
    { name: "an empty text", values: '299 - ""', warnings: [{ code: 299, agent: "-", text: "" }] },
    { name: "a malformed value skips the rest of its header only", values: ['299 - "kept", 29 - "bad", 299 - "lost"', '299 - "next header"'], warnings: [{ code: 299, agent: "-", text: "kept" }, { code: 299, agent: "-", text: "next header" }], errors: 1 },
    { name: "an unterminated text", values: '299 - "no end', warnings: [], errors: 1 },
    { name: "a text without quotes", values: "299 - bare words", warnings: [], errors: 1 },
    { name: "junk after a text", values: '299 - "a" junk', warnings: [], errors: 1 }
  ]
  for (const c of cases)
    it(c.name, () => {
      const parsed = Warnings.parse(c.values)
      expect(parsed.warnings).toEqual(c.warnings)
      expect(parsed.errors.length).toBe(c.errors ?? 0)
    })

  it("messages: only code 299 with a text, as kubectl prints", () => {
    expect(Warnings.messages('299 - "shown", 199 - "a cache note", 299 - "", 299 api "also shown"')).toEqual(["shown", "also shown"])
  })
})

describe.each(["fetch", "transport"] as const)("Client onWarning over %s, against a real in-process API server", (route) => {
  it("reports PodSecurity's warnings on a create and on a patch", async () => {
    const seen: Array<string> = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const store = makeMemory()
          const admission = yield* AdmissionPlugins.make({ store, region: "local" })
          const server = yield* ApiServer.make({ store, authenticate: () => Effect.succeed(userOf("admin")), admission })
          const client = Client.make({
            server: "http://fleet.test",
            ...(route === "fetch" ? { fetch: InProcess.fetch(server.handle) } : { transport: InProcess.transport(server.handle) }),
            onWarning: (t) => seen.push(t)
          })
          const ns = (name: string, enforce: string) => ({
            apiVersion: "v1",
            kind: "Namespace",
            metadata: { name, labels: { "pod-security.kubernetes.io/enforce": enforce, "pod-security.kubernetes.io/warn": "restricted" } }
          })
          const pod = (namespace: string) => ({
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name: "p", namespace },
            spec: { containers: [{ name: "a", image: "x", securityContext: { privileged: true } }] }
          })
          yield* client.create(ns("loose", "privileged"))
          yield* client.create(ns("tight", "restricted"))
          expect(seen).toEqual([])
          yield* client.create(pod("loose"))
          expect(seen).toHaveLength(1)
          expect(seen[0]).toMatch(/^would violate PodSecurity "restricted:latest": privileged \(container "a" must not set securityContext.privileged=true\)/)
          // A refused pod gets no warning (kube's rule): the refusal says it all.
          const refused = yield* Effect.flip(client.create(pod("tight")))
          expect(refused.status.code).toBe(403)
          expect(seen).toHaveLength(1)
          // Tightening enforce warns, on the patch's answer, about the pod already there.
          yield* client.patch({ apiVersion: "v1", kind: "Namespace" }, undefined, "loose", "merge", { metadata: { labels: { "pod-security.kubernetes.io/enforce": "baseline" } } })
          expect(seen.slice(1)).toEqual(['existing pods in namespace "loose" violate the new PodSecurity enforce level "baseline:latest"', "p: privileged"])
        })
      )
    )
  })
})
