// The subset of better-sqlite3 12's API this package uses. The package ships no types and
// @types/better-sqlite3 is not a dependency, so the surface is declared here, narrowly.
declare module "better-sqlite3" {
  namespace Database {
    interface RunResult {
      readonly changes: number
      readonly lastInsertRowid: number | bigint
    }
    interface Statement<Row = unknown> {
      run(...params: ReadonlyArray<unknown>): RunResult
      get(...params: ReadonlyArray<unknown>): Row | undefined
      all(...params: ReadonlyArray<unknown>): Array<Row>
      iterate(...params: ReadonlyArray<unknown>): IterableIterator<Row>
      raw(toggle?: boolean): Statement<Row>
      pluck(toggle?: boolean): Statement<Row>
    }
    interface Options {
      readonly readonly?: boolean
      readonly fileMustExist?: boolean
      readonly timeout?: number
    }
    interface Database {
      readonly open: boolean
      readonly inTransaction: boolean
      readonly name: string
      prepare<Row = unknown>(source: string): Statement<Row>
      exec(source: string): this
      pragma(source: string, options?: { readonly simple?: boolean }): unknown
      close(): this
    }
    interface SqliteError extends Error {
      readonly code: string
    }
  }
  interface DatabaseConstructor {
    new (filename: string, options?: Database.Options): Database.Database
    readonly SqliteError: new (message: string, code: string) => Database.SqliteError
  }
  const Database: DatabaseConstructor
  export = Database
}
