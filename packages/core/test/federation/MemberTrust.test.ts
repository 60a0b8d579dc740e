/**
 * What a member's certificate is worth at the hub (MemberAuthentication over a real memory store)
 * and what a member may write about itself (MemberRestriction).
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { MemberRestriction } from "../../src/admission/index.js"
import { Authn, Federation, MemberAuthentication } from "../../src/index.js"
import * as Keys from "../../src/store/Keys.js"
import { makeMemory } from "../../src/store/Store.js"

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

describe("MemberAuthentication", () => {
  const certificate = (serial: string, member = "east") => ({ commonName: `system:member:${member}`, organizations: [Federation.MembersGroup], serial })
  const withEntry = async (status: Record<string, unknown>, metadata: Record<string, unknown> = {}) => {
    const store = makeMemory()
    const mc = { apiVersion: Federation.ApiVersion, kind: "MemberCluster", metadata: { name: "east", ...metadata }, spec: { syncMode: "Pull" }, status }
    await Effect.runPromise(store.create(Keys.object({ group: Federation.Group, resource: "memberclusters", name: "east" }), JSON.stringify(mc)))
    return (serial: string) =>
      Effect.runPromise(
        MemberAuthentication.authenticate(store, certificate(serial)).pipe(
          Effect.map((u) => u?.name),
          Effect.catchAll((e) => Effect.succeed(`${e.status.code}: ${e.status.message}`))
        )
      )
  }

  it.each([
    ["the current serial", "0a1b", "system:member:east"],
    ["the current serial, written with leading zeros and in capitals", "000A1B", "system:member:east"],
    ["the previous serial within ten minutes of the renewal", "09ff", "system:member:east"],
    ["another serial", "0c0c", "401: member certificate of east refused: it is not the member's current certificate"]
  ])("%s", async (_what, serial, expected) => {
    const auth = await withEntry({ certificate: { serial: "0a1b", previousSerial: "09ff", rotatedAt: iso(Date.now() - 60_000) } })
    expect(await auth(serial)).toBe(expected)
  })

  it("the previous serial ten minutes after the renewal, or without a renewal time, is refused", async () => {
    const late = await withEntry({ certificate: { serial: "0a1b", previousSerial: "09ff", rotatedAt: iso(Date.now() - MemberAuthentication.previousGraceMs - 5_000) } })
    expect(await late("09ff")).toBe("401: member certificate of east refused: it was replaced by a renewal more than 10 minutes ago")
    const undated = await withEntry({ certificate: { serial: "0a1b", previousSerial: "09ff" } })
    expect(await undated("09ff")).toMatch(/^401: .*renewal/)
    expect(await late("0a1b")).toBe("system:member:east")
  })

  it("a member that gave the hub its token's hash must present that token beside the certificate", async () => {
    const store = makeMemory()
    const hash = await Effect.runPromise(Authn.hashToken("s3cret"))
    const mc = { apiVersion: Federation.ApiVersion, kind: "MemberCluster", metadata: { name: "east" }, spec: { syncMode: "Pull" }, status: { certificate: { serial: "0a1b", tokenHash: hash } } }
    await Effect.runPromise(store.create(Keys.object({ group: Federation.Group, resource: "memberclusters", name: "east" }), JSON.stringify(mc)))
    const auth = (token: string | undefined) =>
      Effect.runPromise(
        MemberAuthentication.authenticate(store, certificate("0a1b"), undefined, token).pipe(
          Effect.map((u) => u?.name),
          Effect.catchAll((e) => Effect.succeed(`${e.status.code}: ${e.status.message}`))
        )
      )
    expect(await auth("s3cret")).toBe("system:member:east")
    expect(await auth(undefined)).toBe("401: member certificate of east refused: its member token is missing")
    expect(await auth("s3cret!")).toBe("401: member certificate of east refused: its member token is wrong")
  })

  it("a member being removed, or not registered, is refused; a certificate that is not a member's is left to others", async () => {
    const deleting = await withEntry({ certificate: { serial: "0a1b" } }, { deletionTimestamp: iso(Date.now()) })
    expect(await deleting("0a1b")).toBe("401: member certificate of east refused: the member is being removed")
    const store = makeMemory()
    const none = await Effect.runPromise(MemberAuthentication.authenticate(store, certificate("0a1b", "west")).pipe(Effect.either))
    expect(none._tag === "Left" ? none.left.status.message : "").toBe("member certificate of west refused: the member is not registered")
    expect(await Effect.runPromise(MemberAuthentication.authenticate(store, { commonName: "alice", organizations: ["devs"], serial: "1" }))).toBeUndefined()
  })
})

describe("MemberRestriction", () => {
  const member = { name: "system:member:east", uid: "member:east", groups: [Federation.MembersGroup, "system:authenticated"] }
  const admin = { name: "admin", uid: "admin", groups: ["system:masters"] }
  const mc = (spec: Record<string, unknown>, status: Record<string, unknown> = {}, labels: Record<string, string> = {}) => ({
    apiVersion: Federation.ApiVersion,
    kind: "MemberCluster",
    metadata: { name: "east", labels },
    spec: { syncMode: "Pull", ...spec },
    status
  })
  const taint = { key: "federation.fleet.koder.dev/unreachable", effect: "NoSchedule" }
  const resource = { group: Federation.Group, version: Federation.Version, plural: "memberclusters" } as unknown as Parameters<typeof MemberRestriction.decide>[0]["resource"]

  it.each([
    ["a member reports its status", member, "status", mc({}, { nodeCount: 1 }), mc({}, { nodeCount: 3 }), undefined],
    ["a member lifts its own taint", member, "", mc({ taints: [taint] }), mc({ taints: [] }), `member "east" may not change its MemberCluster's spec (the hub's decisions about it)`],
    ["a member moves itself to another region", member, "", mc({ region: "eu" }), mc({ region: "us" }), `member "east" may not change its MemberCluster's spec (the hub's decisions about it)`],
    ["a member relabels itself", member, "", mc({}, {}, { tier: "b" }), mc({}, {}, { tier: "gold" }), `member "east" may not change its MemberCluster's labels`],
    ["a member revives an old certificate", member, "status", mc({}, { certificate: { serial: "0a" } }), mc({}, { certificate: { serial: "0a", previousSerial: "01" } }), `member "east" may not change status.certificate (the hub's record of the certificates it accepts)`],
    ["an administrator lifts the taint", admin, "", mc({ taints: [taint] }), mc({ taints: [] }), undefined]
  ])("%s", (_what, user, subresource, before, after, expected) => {
    expect(MemberRestriction.decide({ operation: "UPDATE", user, resource, subresource, object: after, oldObject: before })).toBe(expected)
  })
})
