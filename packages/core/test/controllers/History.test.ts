import { describe, expect, it } from "vitest"
import * as History from "../../src/controllers/History.js"

const owner = (image: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "StatefulSet",
  metadata: { name: "web", namespace: "default", uid: "u-1", annotations: { team: "a" }, ...extra },
  spec: { template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image }] } } }
})

const revision = (name: string, number: number, image: string) => ({
  apiVersion: "apps/v1",
  kind: "ControllerRevision",
  metadata: { name, namespace: "default", labels: { [History.HashLabel]: name.slice(4) } },
  data: History.patchOf(owner(image)),
  revision: number
})

describe("History", () => {
  it("stores a patch that replaces the template and restores it", () => {
    const data = History.patchOf(owner("v1"))
    expect(data).toEqual({ spec: { template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "v1" }] }, $patch: "replace" } } })
    expect(History.templateOf({ data })).toEqual(owner("v1").spec.template)
  })

  it("makes a revision named and labelled by its hash, owned by the owner, with template labels and owner annotations", () => {
    const r = History.make(owner("v1"), { data: History.patchOf(owner("v1")), revision: 3, hash: "abc" }) as any
    expect(r.metadata.name).toBe("web-abc")
    expect(r.metadata.labels).toEqual({ app: "web", [History.HashLabel]: "abc" })
    expect(r.metadata.annotations).toEqual({ team: "a" })
    expect(r.metadata.ownerReferences).toEqual([{ apiVersion: "apps/v1", kind: "StatefulSet", name: "web", uid: "u-1", controller: true, blockOwnerDeletion: true }])
    expect(r.revision).toBe(3)
    expect(History.hashOf(r)).toBe("abc")
    expect(History.revisionName("x".repeat(300), "h")).toHaveLength(225)
  })

  it("compares data canonically (key order does not matter)", () => {
    expect(History.sameData({ a: 1, b: { c: 2, d: 3 } }, { b: { d: 3, c: 2 }, a: 1 })).toBe(true)
    expect(History.sameData({ a: 1 }, { a: 2 })).toBe(false)
  })

  it("numbers the next revision one past the largest", () => {
    expect(History.nextRevision([])).toBe(1)
    expect(History.nextRevision([revision("web-a", 4, "v1"), revision("web-b", 2, "v2")])).toBe(5)
  })

  const history = [revision("web-a", 1, "v1"), revision("web-b", 2, "v2"), revision("web-c", 3, "v3")]
  const cases: ReadonlyArray<[string, ReadonlyArray<Record<string, unknown>>, string, History.Resolution["_tag"], string | number]> = [
    ["no history: create revision 1", [], "v1", "Create", 1],
    ["the newest holds it", history, "v3", "Existing", "web-c"],
    ["an older one holds it: roll back by renumbering", history, "v1", "Renumber", 4],
    ["nobody holds it: create the next", history, "v4", "Create", 4],
    ["unsorted input is sorted first", [history[2]!, history[0]!, history[1]!], "v3", "Existing", "web-c"]
  ]
  it.each(cases)("resolve: %s", (_what, revisions, image, tag, detail) => {
    const r = History.resolve(revisions, History.patchOf(owner(image)))
    expect(r._tag).toBe(tag)
    if (r._tag === "Create") expect(r.number).toBe(detail)
    if (r._tag === "Existing") expect((r.revision as any).metadata.name).toBe(detail)
    if (r._tag === "Renumber") expect(r.to).toBe(detail)
  })

  const many = [1, 2, 3, 4, 5, 6].map((n) => revision(`web-${n}`, n, `v${n}`))
  const truncations: ReadonlyArray<[string, ReadonlyArray<string>, number, ReadonlyArray<string>]> = [
    ["under the limit", ["web-6"], 10, []],
    ["oldest non-live go first", ["web-6"], 2, ["web-1", "web-2", "web-3"]],
    ["live revisions are never deleted nor counted", ["web-1", "web-6"], 2, ["web-2", "web-3"]],
    ["limit 0 keeps only live ones", ["web-5", "web-6"], 0, ["web-1", "web-2", "web-3", "web-4"]]
  ]
  it.each(truncations)("toTruncate: %s", (_what, live, limit, want) => {
    expect(History.toTruncate([...many].reverse(), new Set(live), limit).map((r: any) => r.metadata.name)).toEqual(want)
  })
})
