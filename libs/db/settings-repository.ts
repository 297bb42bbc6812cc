import type { PrismaClient } from './generated/prisma/client.ts';

export interface ConnectionRecord {
  fromHandle: string;
  toHandle: string;
  rule: 'allow' | 'block';
  updatedAt: Date;
}

/** Runtime settings and directed connections, through Prisma (not on the hot path). */
export class SettingsRepository {
  constructor(private readonly prisma: PrismaClient) {}

  async all(): Promise<Array<{ key: string; value: unknown; updatedAt: Date }>> {
    return this.prisma.setting.findMany({ orderBy: { key: 'asc' } });
  }

  async set(key: string, value: unknown, at: Date): Promise<void> {
    const json = value === null ? 'null' : JSON.stringify(value);
    // JSON null must be stored as a JSON value, not SQL NULL (the column is NOT NULL).
    await this.prisma.$executeRaw`
      INSERT INTO settings (key, value, updated_at) VALUES (${key}, ${json}::jsonb, ${at})
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`;
  }

  async setConnection(projectId: string, id: string, fromId: string, toId: string, rule: 'allow' | 'block', at: Date): Promise<void> {
    await this.prisma.connection.upsert({
      where: { fromId_toId: { fromId, toId } },
      create: { id, projectId, fromId, toId, rule, updatedAt: at },
      update: { rule, updatedAt: at },
    });
  }

  async connections(projectId: string): Promise<ConnectionRecord[]> {
    const rows = await this.prisma.connection.findMany({
      where: { projectId },
      include: { from: { select: { handle: true } }, to: { select: { handle: true } } },
      orderBy: { updatedAt: 'asc' },
    });
    return rows.map((r) => ({ fromHandle: r.from.handle, toHandle: r.to.handle, rule: r.rule, updatedAt: r.updatedAt }));
  }
}
