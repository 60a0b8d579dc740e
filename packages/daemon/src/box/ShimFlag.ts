/**
 * `--shim auto|sh`, shared by `koder-fleet box` and `koder-fleet dev` (which checks it before its
 * node thread loads the box). Its own module so that dev's main thread need not import the box.
 */

/** How the process driver starts containers: the native shim when it can (`auto`), or always `sh`. */
export type Shim = "auto" | "sh"

/** A `--shim` value (unset: auto); a string is the error to print. */
export const parse = (value: string | undefined): { readonly shim: Shim } | string =>
  value === undefined || value === "auto" || value === "sh" ? { shim: value ?? "auto" } : `--shim ${JSON.stringify(value)}: expected auto or sh`
