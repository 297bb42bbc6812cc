-- Turn accounting for webhook agents (issue 34): the usage a signed callback reported with its
-- final status (libs/domain/turn-usage.ts, checkReportedUsage), read back with the report and
-- stored on the attempt by the turn's end. NULL: the callback reported none.
ALTER TABLE turn_reports ADD COLUMN usage jsonb;
