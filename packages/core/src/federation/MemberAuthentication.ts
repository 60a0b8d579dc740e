/**
 * A member's identity at the hub, from its client certificate: the HTTPS front verified the chain
 * against the hub's CA and passes the subject and serial on; here the subject must be a member's
 * (`CN=system:member:<name>`, `O=system:members`), its MemberCluster must exist and not be
 * deleting, and the serial must be the one the hub last issued to it (or, for ten minutes after
 * a renewal, the one before: connections opened with it). So unjoining revokes at once, and so does a later join under the same
 * name: an old certificate is no longer the current one.
 */
import { Clock, Effect } from "effect"
import * as ApiError from "../api/ApiError.js"
import * as Authn from "../api/Authn.js"
import type { UserInfo } from "../api/Http.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Federation from "../model/Federation.js"
import * as Status from "../model/Status.js"
import { asObject, asString } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { StoreService } from "../store/Store.js"

/** The verified certificate as the front passes it. */
export interface Certificate {
  readonly commonName: string
  readonly organizations: ReadonlyArray<string>
  readonly serial: string
}

/** How long a renewed member's previous certificate is still accepted (connections opened with it). */
export const previousGraceMs = 10 * 60_000

const normal = (serial: string) => serial.toLowerCase().replace(/^0+/, "") || "0"

/** Parse the front's header value (undefined: absent or not JSON of that shape). */
export const parse = (value: string | undefined): Certificate | undefined => {
  if (value === undefined) return undefined
  try {
    const o = JSON.parse(value) as Partial<Certificate>
    return typeof o.commonName === "string" && Array.isArray(o.organizations) && typeof o.serial === "string" ? (o as Certificate) : undefined
  } catch {
    return undefined
  }
}

/**
 * The member a certificate authenticates (undefined: not a member's certificate, let other
 * authenticators try); fails 401 for a member certificate the hub no longer accepts.
 */
export const authenticate = (store: StoreService, certificate: Certificate, transformer: Transformer = identity, token?: string): Effect.Effect<UserInfo | undefined, ApiError.ApiError> => {
  const user = { name: certificate.commonName, groups: certificate.organizations }
  const member = Federation.memberOf(user)
  if (member === undefined || certificate.organizations.length !== 1) return Effect.succeed(undefined)
  const refused = (why: string) => Effect.fail(ApiError.of(Status.unauthorized(`member certificate of ${member} refused: ${why}`)))
  return store.get(Keys.object({ group: Federation.Group, resource: "memberclusters", name: member })).pipe(
    Effect.catchAll(() => Effect.succeed(undefined)),
    Effect.flatMap((kv) => {
      if (kv === undefined) return refused("the member is not registered")
      let mc: Record<string, unknown>
      try {
        mc = JSON.parse(transformer.fromStore({ group: Federation.Group, plural: "memberclusters" }, kv.value)) as Record<string, unknown>
      } catch {
        return refused("its entry cannot be read")
      }
      if (asObject(mc["metadata"])["deletionTimestamp"] != null) return refused("the member is being removed")
      const cert = asObject(asObject(mc["status"])["certificate"])
      const presented = normal(certificate.serial)
      const user = Effect.succeed<UserInfo>({ name: certificate.commonName, uid: `member:${member}`, groups: [Federation.MembersGroup, "system:authenticated"] })
      // The member's own token beside its certificate, when it gave the hub one to want.
      const wanted = asString(cert["tokenHash"])
      const ok =
        wanted === ""
          ? user
          : token === undefined
            ? refused("its member token is missing")
            : Effect.flatMap(Authn.hashToken(token), (hash) => (Authn.constantTimeEqual(hash, wanted) ? user : refused("its member token is wrong")))
      if (asString(cert["serial"]) !== "" && normal(asString(cert["serial"])) === presented) return ok
      if (asString(cert["previousSerial"]) === "" || normal(asString(cert["previousSerial"])) !== presented) return refused("it is not the member's current certificate")
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const rotated = Date.parse(asString(cert["rotatedAt"]))
        return Number.isFinite(rotated) && now - rotated <= previousGraceMs ? ok : refused("it was replaced by a renewal more than 10 minutes ago")
      })
    })
  )
}
