"""A 300-table ERP database in one SQLite file, generated deterministically, for large-schema work.

Twenty modules named the way ERP suites name them (``gl_`` general ledger, ``ap_`` / ``ar_``
payables and receivables, ``sls_`` sales, ``pur_`` purchasing, ``inv_`` inventory and warehouse,
``mfg_`` manufacturing, ``hr_`` / ``pay_`` people and payroll, ``crm_``, ``prj_`` projects,
``fa_`` fixed assets, ...) over shared look-up tables (``ref_currencies``, ``ref_countries``,
``ref_units_of_measure``, ``ref_payment_terms``, ``ref_status_codes``, ...), with foreign keys
and a few rows in every table so samples and distinct values work. SQLite keeps no comments, so
the names carry the meaning. ``ERP_QUESTIONS`` pairs analysts' questions with the tables a
correct query needs.

Example:
    >>> import tempfile, sqlite3
    >>> from pathlib import Path
    >>> path = build_erp_database(Path(tempfile.mkdtemp()) / "erp.sqlite")
    >>> sqlite3.connect(path).execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    300
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from orchestrator.sqlite_file import write_sqlite_atomically

__all__ = [
    "ERP_MODULES",
    "ERP_QUESTIONS",
    "ErpColumn",
    "ErpTable",
    "build_erp_database",
    "erp_tables",
]

#: Module prefix -> what the module is, for people reading the schema.
ERP_MODULES = {
    "core": "companies, sites, users, roles, audit",
    "ref": "shared look-up tables",
    "gl": "general ledger and finance",
    "cm": "cash and bank management",
    "ap": "accounts payable",
    "ar": "accounts receivable",
    "crm": "customers, leads, opportunities, support cases",
    "sls": "sales orders, quotations, shipments, commissions",
    "pur": "suppliers and purchasing",
    "inv": "items, warehouses and stock",
    "mfg": "manufacturing and maintenance",
    "hr": "employees, leave, recruiting, training, expenses",
    "pay": "payroll",
    "prj": "projects and time",
    "fa": "fixed assets",
    "tms": "transport and logistics",
    "svc": "field service and warranty",
    "wf": "approval workflows",
    "tax": "tax returns and transactions",
    "rpt": "reporting summaries",
}

# One table per line, indented lines continuing it: ``name[(pk)]: column, column, ...``. A column
# is ``name[:TYPE]`` or a foreign key ``[name]>table`` (the name defaults to the referenced table's
# key). Types not given follow from the name (see ``_column_type``). Every table but the look-ups
# also gets created_at/updated_at.
SPEC = """
ref_currencies: currency_code, name, symbol, decimal_places:INTEGER
ref_countries: country_code, name, iso3_code, world_region, >ref_currencies
ref_states_provinces: >ref_countries, state_code, name
ref_exchange_rates: from_currency_id>ref_currencies, to_currency_id>ref_currencies, rate_date,
    exchange_rate:NUMERIC(18, 6), rate_type
ref_units_of_measure(uom_id): uom_code, name, uom_category
ref_uom_conversions: from_uom_id>ref_units_of_measure, to_uom_id>ref_units_of_measure,
    conversion_factor:NUMERIC(18, 6)
ref_payment_terms: term_code, name, due_days:INTEGER, discount_days:INTEGER, discount_percent
ref_payment_methods: method_code, name, is_electronic
ref_status_codes: entity_type, status_code, name, is_final
ref_tax_codes: tax_code, name, tax_rate:NUMERIC(7, 4), >ref_countries, tax_type
ref_tax_jurisdictions: >ref_countries, >ref_states_provinces, jurisdiction_code, name
ref_languages: language_code, name
ref_time_zones: time_zone_code, name, utc_offset_minutes:INTEGER
ref_industries: industry_code, name, sector
ref_incoterms: incoterm_code, name, description
ref_shipping_methods: shipping_method_code, name, carrier_name, is_express
ref_reason_codes: reason_type, reason_code, name
ref_banks: bank_name, swift_code, >ref_countries
core_companies: company_code, name, legal_name, tax_registration_number, >ref_countries,
    base_currency_id>ref_currencies, is_active
core_business_units: >core_companies, business_unit_code, name
core_sites: >core_companies, site_code, name, address_line1, city, postal_code, >ref_countries, >ref_time_zones
core_users: username, email, full_name, >hr_employees, >ref_languages, is_active, last_login_at
core_roles: role_code, name, description
core_user_roles: >core_users, >core_roles, granted_at
core_permissions: permission_code, name, module_code
core_role_permissions: >core_roles, >core_permissions
core_audit_log(audit_entry_id): >core_users, table_name, record_id:INTEGER, action, changed_at,
    old_value:VARCHAR(400), new_value:VARCHAR(400)
core_document_sequences: >core_companies, document_type, prefix, next_number:INTEGER
core_attachments: entity_type, entity_id:INTEGER, file_name, mime_type, size_bytes:INTEGER,
    uploaded_by_user_id>core_users
core_system_settings: module_code, setting_key, setting_value:VARCHAR(400)
core_calendars: name, >ref_countries
core_calendar_holidays: >core_calendars, holiday_date, name
gl_fiscal_years: >core_companies, fiscal_year:INTEGER, start_date, end_date, is_closed
gl_fiscal_periods: >gl_fiscal_years, period_number:INTEGER, period_name, start_date, end_date, is_closed
gl_account_types: account_type_code, name, normal_balance:VARCHAR(6), is_balance_sheet
gl_accounts: account_number, name, >gl_account_types, parent_account_id>gl_accounts, >ref_currencies, is_active,
    is_reconcilable
gl_cost_centers: cost_center_code, name, >core_companies, manager_employee_id>hr_employees,
    parent_cost_center_id>gl_cost_centers
gl_profit_centers: profit_center_code, name, >core_business_units
gl_journals: journal_code, name, journal_type, >core_companies
gl_journal_entries: >gl_journals, entry_number, entry_date, >gl_fiscal_periods, description, >ref_currencies, status,
    posted_at, posted_by_user_id>core_users
gl_journal_lines: >gl_journal_entries, line_number:INTEGER, >gl_accounts, >gl_cost_centers, >gl_profit_centers,
    debit_amount, credit_amount, description
gl_account_balances: >gl_accounts, >gl_fiscal_periods, >gl_cost_centers, opening_balance, debit_total, credit_total,
    closing_balance
gl_budgets: budget_name, >gl_fiscal_years, version_number:INTEGER, status
gl_budget_lines: >gl_budgets, >gl_accounts, >gl_cost_centers, >gl_fiscal_periods, budget_amount
gl_recurring_entries: name, >gl_journals, frequency, next_run_date, amount
gl_allocation_rules: name, source_cost_center_id>gl_cost_centers, allocation_basis, is_active
gl_allocation_targets: >gl_allocation_rules, target_cost_center_id>gl_cost_centers, allocation_percent
gl_intercompany_transactions: from_company_id>core_companies, to_company_id>core_companies, transaction_date, amount,
    >ref_currencies, >gl_journal_entries, status
gl_period_close_tasks: >gl_fiscal_periods, task_name, assigned_user_id>core_users, due_date, completed_at, status
gl_currency_revaluations: >gl_fiscal_periods, >ref_currencies, revaluation_rate:NUMERIC(18, 6),
    unrealized_gain_loss_amount, >gl_journal_entries
gl_consolidation_groups: name, parent_company_id>core_companies, reporting_currency_id>ref_currencies
cm_bank_accounts: >ref_banks, account_name, iban, bank_account_number, >ref_currencies, >gl_accounts, >core_companies
cm_bank_statements: >cm_bank_accounts, statement_number, statement_date, opening_balance, closing_balance
cm_bank_statement_lines: >cm_bank_statements, transaction_date, amount, reference, description, is_reconciled
cm_reconciliations: >cm_bank_accounts, reconciliation_date, statement_balance, book_balance, difference_amount,
    status, >core_users
cm_cash_forecasts: >cm_bank_accounts, forecast_date, expected_inflow_amount, expected_outflow_amount
cm_payment_runs: run_date, >cm_bank_accounts, >ref_payment_methods, total_amount, payment_count:INTEGER, status
cm_petty_cash_funds: name, custodian_employee_id>hr_employees, fund_limit_amount, current_balance
cm_petty_cash_vouchers: >cm_petty_cash_funds, voucher_date, amount, purpose, >gl_accounts
ap_invoices: invoice_number, supplier_invoice_number, >pur_suppliers, >core_companies, >pur_purchase_orders,
    invoice_date, due_date, >ref_currencies, >ref_payment_terms, subtotal_amount, tax_amount, total_amount, amount_paid,
    status
ap_invoice_lines: >ap_invoices, line_number:INTEGER, >pur_purchase_order_lines, description, quantity, unit_price,
    line_amount, >gl_accounts, >ref_tax_codes
ap_payments: payment_number, >pur_suppliers, payment_date, amount, >ref_currencies, >ref_payment_methods,
    >cm_bank_accounts, >cm_payment_runs, status
ap_payment_allocations: >ap_payments, >ap_invoices, allocated_amount, discount_taken_amount
ap_credit_memos: credit_memo_number, >pur_suppliers, >ap_invoices, memo_date, amount, reason
ap_invoice_holds: >ap_invoices, hold_reason, placed_at, released_at, >core_users
ap_invoice_approvals: >ap_invoices, approver_user_id>core_users, approval_level:INTEGER, decision, decided_at
ap_withholding_taxes: >ap_invoices, >ref_tax_codes, withheld_amount
ap_recurring_invoices: >pur_suppliers, description, amount, frequency, next_invoice_date
ap_supplier_balances: >pur_suppliers, as_of_date, balance_amount, overdue_amount
ap_aging_snapshots: snapshot_date, >pur_suppliers, current_amount, days_30_amount, days_60_amount, days_90_amount,
    over_90_amount
ap_prepayments: >pur_suppliers, prepayment_date, amount, applied_amount, >ref_currencies
ar_invoices: invoice_number, >crm_customers, >core_companies, >sls_sales_orders, invoice_date, due_date,
    >ref_currencies, >ref_payment_terms, subtotal_amount, tax_amount, total_amount, amount_paid, status
ar_invoice_lines: >ar_invoices, line_number:INTEGER, >inv_items, >sls_sales_order_lines, description, quantity,
    unit_price, discount_percent, line_amount, >ref_tax_codes, >gl_accounts
ar_receipts: receipt_number, >crm_customers, receipt_date, amount, >ref_currencies, >ref_payment_methods,
    >cm_bank_accounts, status
ar_receipt_allocations: >ar_receipts, >ar_invoices, allocated_amount, discount_given_amount
ar_credit_notes: credit_note_number, >crm_customers, >ar_invoices, note_date, amount, >ref_reason_codes
ar_dunning_levels: level_number:INTEGER, name, days_overdue:INTEGER, fee_amount
ar_dunning_letters: >crm_customers, >ar_dunning_levels, sent_date, total_overdue_amount
ar_customer_balances: >crm_customers, as_of_date, balance_amount, overdue_amount, credit_limit_amount
ar_aging_snapshots: snapshot_date, >crm_customers, current_amount, days_30_amount, days_60_amount, days_90_amount,
    over_90_amount
ar_write_offs: >ar_invoices, write_off_date, amount, >ref_reason_codes, approved_by_user_id>core_users
ar_collection_cases: >crm_customers, opened_date, closed_date, collector_employee_id>hr_employees, amount_due, status
ar_collection_activities: >ar_collection_cases, activity_date, activity_type, outcome, notes
ar_payment_plans: >crm_customers, start_date, installment_count:INTEGER, total_amount, status
ar_payment_plan_installments: >ar_payment_plans, due_date, amount, paid_date
ar_customer_deposits: >crm_customers, deposit_date, amount, applied_amount
ar_recurring_billing_schedules: >crm_customers, >inv_items, frequency, amount, next_billing_date
crm_customer_groups: customer_group_code, name, discount_percent
crm_customers: customer_number, name, legal_name, >ref_industries, customer_segment, >ref_countries, city,
    >ref_currencies, >ref_payment_terms, credit_limit_amount, account_manager_employee_id>hr_employees, is_active,
    customer_since_date
crm_customer_group_members: >crm_customer_groups, >crm_customers
crm_customer_addresses: >crm_customers, address_type, address_line1, address_line2, city, postal_code,
    >ref_states_provinces, >ref_countries, is_default
crm_contacts: >crm_customers, first_name, last_name, job_title, email, phone, is_primary
crm_lead_sources: lead_source_code, name, channel
crm_leads: lead_number, company_name, contact_name, email, >crm_lead_sources, >ref_industries, >ref_countries,
    estimated_value_amount, status, owner_employee_id>hr_employees
crm_sales_stages: stage_name, stage_order:INTEGER, default_probability_percent, is_closed, is_won
crm_opportunities: opportunity_name, >crm_customers, >crm_leads, >crm_sales_stages, expected_close_date,
    estimated_amount, probability_percent, owner_employee_id>hr_employees, status
crm_opportunity_products: >crm_opportunities, >inv_items, quantity, unit_price
crm_activities: activity_type, subject, >crm_contacts, >crm_opportunities, owner_employee_id>hr_employees, due_date,
    completed_at, status
crm_campaigns: campaign_name, campaign_type, start_date, end_date, budget_amount, actual_cost, status
crm_campaign_members: >crm_campaigns, >crm_contacts, >crm_leads, response_status, responded_date
crm_case_categories: category_name, sla_hours:INTEGER
crm_cases: case_number, >crm_customers, >crm_contacts, >crm_case_categories, subject, priority, status, opened_at,
    closed_at, assigned_employee_id>hr_employees
crm_case_comments: >crm_cases, comment_text, commented_at, >core_users
crm_territories: territory_name, >ref_countries, manager_employee_id>hr_employees
crm_territory_assignments: >crm_territories, >crm_customers, salesperson_employee_id>hr_employees, start_date
crm_competitors: name, website, strengths
crm_opportunity_competitors: >crm_opportunities, >crm_competitors, notes
crm_customer_surveys: >crm_customers, survey_date, nps_score:INTEGER, satisfaction_score:INTEGER, comments
crm_loyalty_programs: program_name, points_per_currency_unit, start_date
crm_loyalty_accounts: >crm_loyalty_programs, >crm_customers, points_balance:INTEGER, tier
sls_sales_channels: sales_channel_code, name
sls_sales_orders: order_number, >crm_customers, >sls_sales_channels, order_date, requested_delivery_date,
    >ref_currencies, >ref_payment_terms, >ref_incoterms, >ref_shipping_methods, salesperson_employee_id>hr_employees,
    >crm_territories, >inv_warehouses, >crm_opportunities, subtotal_amount, tax_amount, total_amount, status
sls_sales_order_lines: >sls_sales_orders, line_number:INTEGER, >inv_items, quantity, >ref_units_of_measure,
    unit_price, discount_percent, line_amount, promised_date, status
sls_quotations: quotation_number, >crm_customers, >crm_opportunities, quotation_date, valid_until_date, total_amount,
    status
sls_quotation_lines: >sls_quotations, line_number:INTEGER, >inv_items, quantity, unit_price, discount_percent
sls_price_lists: price_list_name, >ref_currencies, valid_from_date, valid_to_date, is_default
sls_price_list_items: >sls_price_lists, >inv_items, unit_price, min_quantity
sls_discount_rules: rule_name, >crm_customer_groups, >inv_item_categories, discount_percent, valid_from_date,
    valid_to_date
sls_promotions: promotion_code, name, start_date, end_date, discount_percent, budget_amount
sls_promotion_items: >sls_promotions, >inv_items
sls_shipments: shipment_number, >sls_sales_orders, >inv_warehouses, ship_date, >ref_shipping_methods, tracking_number,
    freight_cost, status
sls_shipment_lines: >sls_shipments, >sls_sales_order_lines, >inv_items, shipped_quantity, >inv_lots
sls_return_authorizations: rma_number, >crm_customers, >sls_sales_orders, request_date, >ref_reason_codes, status
sls_return_lines: >sls_return_authorizations, >inv_items, returned_quantity, refund_amount, condition_code
sls_commission_plans: plan_name, commission_percent, valid_from_date
sls_commissions: salesperson_employee_id>hr_employees, >ar_invoices, >sls_commission_plans, commission_amount,
    period_month:INTEGER, period_year:INTEGER, paid_date
sls_sales_targets: salesperson_employee_id>hr_employees, >crm_territories, target_year:INTEGER,
    target_quarter:INTEGER, target_amount
sls_backorders: >sls_sales_order_lines, backorder_quantity, expected_date
sls_order_holds: >sls_sales_orders, hold_reason, placed_at, released_at
sls_customer_item_numbers: >crm_customers, >inv_items, customer_item_number
sls_delivery_routes: route_code, name, >inv_warehouses, weekday
pur_supplier_categories: category_name, description
pur_suppliers: supplier_number, name, legal_name, >pur_supplier_categories, >ref_countries, city, >ref_currencies,
    >ref_payment_terms, tax_registration_number, is_active, rating_score:INTEGER, supplier_since_date
pur_supplier_contacts: >pur_suppliers, first_name, last_name, email, phone, job_title
pur_supplier_addresses: >pur_suppliers, address_type, address_line1, city, postal_code, >ref_countries
pur_supplier_bank_accounts: >pur_suppliers, >ref_banks, iban, account_holder_name, >ref_currencies
pur_requisitions: requisition_number, requester_employee_id>hr_employees, >hr_departments, request_date,
    needed_by_date, status, total_estimated_amount
pur_requisition_lines: >pur_requisitions, line_number:INTEGER, >inv_items, description, quantity,
    estimated_unit_price, >gl_cost_centers
pur_purchase_orders: po_number, >pur_suppliers, order_date, expected_delivery_date, >ref_currencies,
    >ref_payment_terms, >ref_incoterms, buyer_employee_id>hr_employees, >inv_warehouses, subtotal_amount, tax_amount,
    total_amount, status
pur_purchase_order_lines: >pur_purchase_orders, line_number:INTEGER, >inv_items, >pur_requisition_lines, quantity,
    >ref_units_of_measure, unit_price, line_amount, received_quantity, promised_date
pur_goods_receipts: receipt_number, >pur_purchase_orders, >inv_warehouses, receipt_date,
    received_by_employee_id>hr_employees, status
pur_goods_receipt_lines: >pur_goods_receipts, >pur_purchase_order_lines, >inv_items, received_quantity,
    accepted_quantity, rejected_quantity, >inv_lots
pur_supplier_returns: return_number, >pur_suppliers, >pur_goods_receipts, return_date, >ref_reason_codes, status
pur_supplier_return_lines: >pur_supplier_returns, >inv_items, returned_quantity, unit_cost
pur_rfqs: rfq_number, issue_date, closing_date, status, buyer_employee_id>hr_employees
pur_rfq_lines: >pur_rfqs, >inv_items, quantity, needed_by_date
pur_supplier_quotes: >pur_rfqs, >pur_suppliers, quote_date, total_amount, lead_time_days:INTEGER, is_selected
pur_contracts: contract_number, >pur_suppliers, start_date, end_date, committed_amount, >ref_currencies, status
pur_contract_items: >pur_contracts, >inv_items, contract_price, min_quantity
pur_supplier_items: >pur_suppliers, >inv_items, supplier_item_number, unit_price, lead_time_days:INTEGER, is_preferred
pur_supplier_evaluations: >pur_suppliers, evaluation_date, quality_score:INTEGER, delivery_score:INTEGER,
    price_score:INTEGER, overall_score:INTEGER, evaluator_employee_id>hr_employees
pur_blanket_agreements: agreement_number, >pur_suppliers, valid_from_date, valid_to_date, total_commitment_amount,
    released_amount
pur_landed_costs: >pur_goods_receipts, cost_type, amount, >ref_currencies, allocation_basis
pur_approval_rules: document_type, min_amount, max_amount, approver_role_id>core_roles
inv_item_categories: category_code, name, parent_category_id>inv_item_categories
inv_item_brands: brand_name, country_of_origin_id>ref_countries
inv_items: item_number, name, description, >inv_item_categories, >inv_item_brands, item_type,
    base_uom_id>ref_units_of_measure, standard_cost, list_price, weight_kg, is_stocked, is_purchased, is_manufactured,
    is_active
inv_item_attributes: attribute_name, data_type
inv_item_attribute_values: >inv_items, >inv_item_attributes, attribute_value:VARCHAR(120)
inv_item_barcodes: >inv_items, barcode, barcode_type
inv_item_uom_conversions: >inv_items, from_uom_id>ref_units_of_measure, to_uom_id>ref_units_of_measure,
    conversion_factor:NUMERIC(18, 6)
inv_warehouses: warehouse_code, name, >core_sites, >ref_countries, city, is_active, manager_employee_id>hr_employees
inv_warehouse_zones: >inv_warehouses, zone_code, name, zone_type, is_temperature_controlled
inv_bin_locations(bin_id): >inv_warehouse_zones, bin_code, aisle, rack, shelf_level:INTEGER, max_weight_kg
inv_stock_levels: >inv_items, >inv_warehouses, >inv_bin_locations, on_hand_quantity, reserved_quantity,
    available_quantity, last_counted_date
inv_lots: lot_number, >inv_items, >pur_suppliers, manufacture_date, expiry_date
inv_serial_numbers: serial_number, >inv_items, >inv_lots, >inv_warehouses, status
inv_stock_moves: move_number, >inv_items, from_warehouse_id>inv_warehouses, to_warehouse_id>inv_warehouses, >inv_lots,
    move_date, move_type, quantity, >ref_units_of_measure, unit_cost, reference_document
inv_stock_transfers: transfer_number, from_warehouse_id>inv_warehouses, to_warehouse_id>inv_warehouses, transfer_date,
    shipped_date, received_date, status
inv_stock_transfer_lines: >inv_stock_transfers, >inv_items, quantity, received_quantity
inv_stock_adjustments: adjustment_number, >inv_warehouses, adjustment_date, >ref_reason_codes,
    approved_by_user_id>core_users, status
inv_stock_adjustment_lines: >inv_stock_adjustments, >inv_items, quantity_change, unit_cost, value_change_amount
inv_cycle_counts: count_number, >inv_warehouses, count_date, counter_employee_id>hr_employees, status
inv_cycle_count_lines: >inv_cycle_counts, >inv_items, >inv_bin_locations, system_quantity, counted_quantity,
    variance_quantity
inv_reorder_rules: >inv_items, >inv_warehouses, min_quantity, max_quantity, reorder_quantity,
    preferred_supplier_id>pur_suppliers
inv_item_costs: >inv_items, cost_method, cost_date, unit_cost, material_cost, labor_cost, overhead_cost
inv_cost_layers: >inv_items, >inv_warehouses, layer_date, original_quantity, remaining_quantity, unit_cost
inv_reservations: >inv_items, >inv_warehouses, >sls_sales_order_lines, reserved_quantity, reserved_at, expires_at
inv_pick_lists: pick_list_number, >inv_warehouses, >sls_sales_orders, picker_employee_id>hr_employees, assigned_at,
    completed_at, status
inv_pick_list_lines: >inv_pick_lists, >inv_items, >inv_bin_locations, requested_quantity, picked_quantity
inv_packages: package_number, >sls_shipments, weight_kg, length_cm, width_cm, height_cm, tracking_number
inv_kit_components: kit_item_id>inv_items, component_item_id>inv_items, component_quantity
inv_item_substitutes: >inv_items, substitute_item_id>inv_items, priority:INTEGER
inv_consignment_stock: >inv_items, >pur_suppliers, >inv_warehouses, quantity, unit_cost
inv_quality_inspections: inspection_number, >pur_goods_receipts, >inv_lots, inspection_date,
    inspector_employee_id>hr_employees, result, defect_count:INTEGER
inv_inventory_valuations: valuation_date, >inv_warehouses, >inv_items, quantity, unit_cost, total_value_amount
mfg_work_centers: work_center_code, name, >core_sites, capacity_hours_per_day, hourly_rate, >gl_cost_centers
mfg_machines: machine_code, name, >mfg_work_centers, >fa_assets, status
mfg_boms: bom_number, product_item_id>inv_items, version_number:INTEGER, is_active, valid_from_date, base_quantity
mfg_bom_lines: >mfg_boms, component_item_id>inv_items, quantity, >ref_units_of_measure, scrap_percent
mfg_routings: routing_number, product_item_id>inv_items, version_number:INTEGER, is_active
mfg_routing_operations: >mfg_routings, operation_sequence:INTEGER, >mfg_work_centers, operation_name, setup_minutes,
    run_minutes_per_unit
mfg_production_orders: production_order_number, product_item_id>inv_items, >mfg_boms, >mfg_routings, >inv_warehouses,
    >sls_sales_orders, planned_quantity, completed_quantity, scrapped_quantity, planned_start_date, planned_end_date,
    actual_start_date, actual_end_date, status
mfg_production_order_components: >mfg_production_orders, component_item_id>inv_items, required_quantity,
    issued_quantity
mfg_production_order_operations: >mfg_production_orders, >mfg_routing_operations, >mfg_work_centers, planned_hours,
    actual_hours, status
mfg_labor_entries: >mfg_production_order_operations, >hr_employees, work_date, hours_worked, labor_cost
mfg_machine_downtime: >mfg_machines, start_at, end_at, downtime_minutes, >ref_reason_codes
mfg_scrap_records: >mfg_production_orders, >inv_items, scrap_quantity, >ref_reason_codes, recorded_date, scrap_cost
mfg_quality_checks: >mfg_production_orders, check_date, inspector_employee_id>hr_employees, sample_size:INTEGER,
    defect_count:INTEGER, result
mfg_mrp_runs: run_date, planning_horizon_days:INTEGER, status, >core_users
mfg_planned_orders: >mfg_mrp_runs, >inv_items, >inv_warehouses, order_type, planned_quantity, due_date
mfg_demand_forecasts: >inv_items, >inv_warehouses, forecast_year:INTEGER, forecast_month:INTEGER, forecast_quantity
mfg_shifts: shift_name, start_time, end_time
mfg_shift_schedules: >mfg_shifts, >mfg_work_centers, >hr_employees, schedule_date
mfg_maintenance_plans: >mfg_machines, plan_name, interval_days:INTEGER, last_performed_date, next_due_date
mfg_maintenance_orders: maintenance_order_number, >mfg_machines, >mfg_maintenance_plans, order_type, scheduled_date,
    completed_date, technician_employee_id>hr_employees, labor_hours, parts_cost, status
mfg_engineering_changes: change_number, >mfg_boms, description, requested_date, approved_date, status
mfg_subcontract_orders: >mfg_production_orders, >pur_suppliers, operation_description, quantity, unit_cost, status
hr_job_grades: job_grade_code, name, min_salary, max_salary
hr_departments: department_code, name, parent_department_id>hr_departments, >gl_cost_centers,
    head_employee_id>hr_employees
hr_job_positions: position_code, title, >hr_departments, >hr_job_grades, is_open, headcount_budget:INTEGER
hr_employees: employee_number, first_name, last_name, email, phone, hire_date, termination_date, >hr_departments,
    >hr_job_positions, manager_employee_id>hr_employees, >core_sites, employment_type, gender, birth_date,
    nationality_country_id>ref_countries, status
hr_employee_addresses: >hr_employees, address_line1, city, postal_code, >ref_countries
hr_emergency_contacts: >hr_employees, contact_name, relationship, phone
hr_employment_contracts: >hr_employees, contract_type, start_date, end_date, weekly_hours, notice_period_days:INTEGER
hr_salary_history: >hr_employees, effective_date, annual_salary, >ref_currencies, change_reason
hr_job_history: >hr_employees, >hr_job_positions, >hr_departments, start_date, end_date
hr_leave_types: leave_type_code, name, is_paid, annual_entitlement_days
hr_leave_requests: >hr_employees, >hr_leave_types, start_date, end_date, days_requested, status,
    approver_employee_id>hr_employees
hr_leave_balances: >hr_employees, >hr_leave_types, balance_year:INTEGER, entitled_days, taken_days, remaining_days
hr_attendance_records: >hr_employees, work_date, clock_in_at, clock_out_at, worked_hours, overtime_hours
hr_timesheets: >hr_employees, week_start_date, total_hours, status, approved_by_employee_id>hr_employees
hr_timesheet_lines: >hr_timesheets, >prj_projects, >prj_tasks, work_date, hours, is_billable
hr_performance_reviews: >hr_employees, reviewer_employee_id>hr_employees, review_year:INTEGER, review_date,
    overall_rating:INTEGER, comments
hr_goals: >hr_employees, goal_title, target_date, progress_percent, status
hr_skills: skill_name, skill_category
hr_employee_skills: >hr_employees, >hr_skills, proficiency_level:INTEGER, certified_date
hr_training_courses: course_code, title, provider_name, duration_hours, cost_amount
hr_training_enrollments: >hr_training_courses, >hr_employees, enrollment_date, completion_date, score:INTEGER, status
hr_job_requisitions: >hr_job_positions, requested_by_employee_id>hr_employees, opened_date, closed_date,
    openings_count:INTEGER, status
hr_candidates: first_name, last_name, email, phone, source_channel, applied_date
hr_applications: >hr_candidates, >hr_job_requisitions, application_date, stage, status, offered_salary
hr_interviews: >hr_applications, interviewer_employee_id>hr_employees, interview_date, interview_type, rating:INTEGER,
    feedback
hr_benefit_plans: plan_name, plan_type, provider_name, employer_contribution_amount, employee_contribution_amount
hr_benefit_enrollments: >hr_employees, >hr_benefit_plans, coverage_level, start_date, end_date
hr_disciplinary_actions: >hr_employees, action_date, action_type, description, issued_by_employee_id>hr_employees
hr_terminations: >hr_employees, termination_date, termination_type, >ref_reason_codes, is_rehire_eligible
hr_expense_categories: category_name, >gl_accounts, daily_limit_amount
hr_expense_reports: report_number, >hr_employees, >prj_projects, submitted_date, total_amount, >ref_currencies,
    status, approved_by_employee_id>hr_employees
hr_expense_lines: >hr_expense_reports, >hr_expense_categories, expense_date, amount, merchant_name, description,
    has_receipt
pay_pay_groups: pay_group_name, pay_frequency, >ref_currencies
pay_earning_types: earning_code, name, is_taxable, >gl_accounts
pay_deduction_types: deduction_code, name, is_pre_tax, >gl_accounts
pay_payroll_runs: >pay_pay_groups, period_start_date, period_end_date, pay_date, status, total_gross_amount,
    total_net_amount
pay_payslips: >pay_payroll_runs, >hr_employees, gross_pay_amount, total_deductions_amount, net_pay_amount,
    >ref_currencies
pay_payslip_lines: >pay_payslips, >pay_earning_types, >pay_deduction_types, amount, hours
pay_employee_pay_rates: >hr_employees, >pay_pay_groups, effective_date, hourly_rate, annual_salary
pay_tax_withholdings: >pay_payslips, >ref_tax_jurisdictions, withheld_amount
pay_bank_transfers: >pay_payslips, >cm_bank_accounts, transfer_date, amount, employee_iban
pay_bonuses: >hr_employees, >pay_payroll_runs, bonus_type, amount, award_date
pay_garnishments: >hr_employees, order_reference, amount_per_period, remaining_balance
pay_overtime_rules: rule_name, threshold_hours, multiplier:NUMERIC(5, 2)
prj_project_types: type_name, is_billable
prj_projects: project_code, name, >prj_project_types, >crm_customers, project_manager_employee_id>hr_employees,
    >hr_departments, start_date, end_date, budget_amount, >ref_currencies, billing_method, status
prj_phases: >prj_projects, phase_name, sequence_number:INTEGER, start_date, end_date
prj_tasks: >prj_projects, >prj_phases, task_name, assigned_employee_id>hr_employees, parent_task_id>prj_tasks,
    planned_hours, actual_hours, start_date, due_date, status
prj_milestones: >prj_projects, milestone_name, due_date, achieved_date, billing_amount
prj_resource_assignments: >prj_projects, >hr_employees, role_name, allocation_percent, start_date, end_date, bill_rate
prj_time_entries: >prj_projects, >prj_tasks, >hr_employees, entry_date, hours, is_billable, bill_rate, cost_rate
prj_expenses: >prj_projects, >hr_employees, expense_date, amount, description, is_billable
prj_budgets: >prj_projects, budget_version:INTEGER, cost_type, budget_amount
prj_billing_events: >prj_projects, >prj_milestones, >ar_invoices, event_date, amount, status
prj_risks: >prj_projects, risk_title, probability_percent, impact, mitigation_plan, owner_employee_id>hr_employees,
    status
prj_issues: >prj_projects, issue_title, severity, reported_date, resolved_date, assigned_employee_id>hr_employees,
    status
prj_change_requests: >prj_projects, title, requested_date, cost_impact_amount, schedule_impact_days:INTEGER, status
prj_status_reports: >prj_projects, report_date, overall_health, percent_complete, summary
fa_depreciation_methods: method_code, name, description
fa_asset_categories: asset_category_code, name, default_useful_life_months:INTEGER, >fa_depreciation_methods,
    asset_account_id>gl_accounts, depreciation_account_id>gl_accounts
fa_assets: asset_number, name, >fa_asset_categories, >core_sites, >hr_departments, custodian_employee_id>hr_employees,
    >pur_suppliers, >ap_invoices, serial_number, acquisition_date, acquisition_cost, salvage_value,
    useful_life_months:INTEGER, status
fa_depreciation_schedules: >fa_assets, >gl_fiscal_periods, depreciation_amount, accumulated_depreciation,
    net_book_value
fa_asset_disposals: >fa_assets, disposal_date, disposal_method, proceeds_amount, gain_loss_amount
fa_asset_transfers: >fa_assets, from_site_id>core_sites, to_site_id>core_sites, transfer_date
fa_asset_revaluations: >fa_assets, revaluation_date, previous_value, new_value, reason
fa_asset_maintenance: >fa_assets, maintenance_date, maintenance_type, cost_amount, vendor_supplier_id>pur_suppliers
fa_leases: lease_number, >fa_assets, lessor_supplier_id>pur_suppliers, start_date, end_date, monthly_payment_amount,
    >ref_currencies
fa_insurance_policies: policy_number, insurer_name, coverage_amount, premium_amount, start_date, end_date
fa_asset_insurance: >fa_assets, >fa_insurance_policies
tms_carriers: carrier_name, scac_code, >ref_countries, is_active
tms_vehicles: registration_number, vehicle_type, capacity_kg, >fa_assets, home_warehouse_id>inv_warehouses
tms_drivers: >hr_employees, license_number, license_expiry_date
tms_routes: route_code, name, origin_warehouse_id>inv_warehouses, distance_km
tms_trips: trip_number, >tms_routes, >tms_vehicles, >tms_drivers, departure_at, arrival_at, fuel_cost, status
tms_trip_stops: >tms_trips, stop_sequence:INTEGER, >sls_shipments, >crm_customer_addresses, arrived_at
tms_freight_rates: >tms_carriers, >ref_shipping_methods, origin_country_id>ref_countries,
    destination_country_id>ref_countries, rate_per_kg, min_charge_amount
tms_freight_invoices: freight_invoice_number, >tms_carriers, >sls_shipments, invoice_date, total_amount, status
svc_service_contracts: contract_number, >crm_customers, start_date, end_date, annual_value_amount,
    sla_response_hours:INTEGER, status
svc_installed_base(installed_unit_id): >crm_customers, >inv_items, >inv_serial_numbers, >crm_customer_addresses,
    install_date, warranty_end_date
svc_service_orders: service_order_number, >crm_customers, >svc_installed_base, >svc_service_contracts, >crm_cases,
    reported_date, completed_date, technician_employee_id>hr_employees, labor_hours, parts_amount, status
svc_service_order_parts: >svc_service_orders, >inv_items, quantity, unit_price
svc_warranty_claims: claim_number, >svc_installed_base, claim_date, >ref_reason_codes, claim_amount, approved_amount,
    status
wf_workflow_definitions: workflow_name, document_type, is_active
wf_workflow_steps: >wf_workflow_definitions, step_number:INTEGER, step_name, approver_role_id>core_roles
wf_workflow_instances: >wf_workflow_definitions, document_type, document_id:INTEGER, started_at, completed_at, status
wf_approval_tasks: >wf_workflow_instances, >wf_workflow_steps, assignee_user_id>core_users, assigned_at, decided_at,
    decision, comments
wf_notifications: >core_users, message, channel, sent_at, read_at
tax_returns: >core_companies, >ref_tax_jurisdictions, period_start_date, period_end_date, filed_date, tax_due_amount,
    tax_paid_amount, status
tax_transactions: >ref_tax_codes, >tax_returns, document_type, document_id:INTEGER, transaction_date, taxable_amount,
    tax_amount
tax_exemption_certificates: >crm_customers, >ref_tax_jurisdictions, certificate_number, valid_from_date, valid_to_date
rpt_daily_sales_summary(summary_id): summary_date, >crm_territories, >sls_sales_channels, order_count:INTEGER,
    gross_sales_amount, net_sales_amount
rpt_monthly_financials(summary_id): >core_companies, >gl_fiscal_periods, revenue_amount, cost_of_goods_sold_amount,
    operating_expense_amount, net_income_amount
"""


def _q(question: str, *tables: str) -> tuple[str, frozenset[str]]:
    return question, frozenset(tables)


#: Analysts' questions with the tables a correct query needs (its gold plan).
ERP_QUESTIONS: list[tuple[str, frozenset[str]]] = [
    _q("What was total invoiced revenue per customer in 2025?", "ar_invoices", "crm_customers"),
    _q(
        "Which customers have overdue receivables of more than 90 days?",
        "ar_aging_snapshots",
        "crm_customers",
    ),
    _q(
        "How much do we owe each supplier right now, oldest due date first?",
        "ap_invoices",
        "pur_suppliers",
    ),
    _q(
        "List unpaid supplier invoices that are on hold and why they were held",
        "ap_invoices",
        "ap_invoice_holds",
    ),
    _q(
        "Top 10 items by quantity sold last quarter",
        "sls_sales_order_lines",
        "sls_sales_orders",
        "inv_items",
    ),
    _q(
        "Average discount given on sales order lines by sales channel",
        "sls_sales_order_lines",
        "sls_sales_orders",
        "sls_sales_channels",
    ),
    _q(
        "Which salespeople beat their sales target in Q3 2025?",
        "sls_sales_targets",
        "sls_sales_orders",
        "hr_employees",
    ),
    _q(
        "Current on-hand stock per warehouse for item category Electronics",
        "inv_stock_levels",
        "inv_warehouses",
        "inv_items",
        "inv_item_categories",
    ),
    _q(
        "Which items are below their reorder point in each warehouse?",
        "inv_reorder_rules",
        "inv_stock_levels",
        "inv_items",
        "inv_warehouses",
    ),
    _q("How many stock moves were transfers between warehouses last month?", "inv_stock_moves"),
    _q(
        "Lots that expire in the next 30 days and the quantity we still hold of them",
        "inv_lots",
        "inv_stock_moves",
        "inv_items",
    ),
    _q(
        "Purchase orders not yet fully received, with supplier and expected delivery date",
        "pur_purchase_orders",
        "pur_purchase_order_lines",
        "pur_suppliers",
    ),
    _q(
        "Average supplier lead time by supplier category",
        "pur_supplier_items",
        "pur_suppliers",
        "pur_supplier_categories",
    ),
    _q(
        "Which suppliers had the worst quality score in their evaluations this year?",
        "pur_supplier_evaluations",
        "pur_suppliers",
    ),
    _q("Total spend per supplier country in 2025", "ap_invoices", "pur_suppliers", "ref_countries"),
    _q(
        "Goods receipts with rejected quantity, by supplier",
        "pur_goods_receipt_lines",
        "pur_goods_receipts",
        "pur_purchase_orders",
        "pur_suppliers",
    ),
    _q(
        "Trial balance: closing balance per GL account for period 12 of fiscal year 2025",
        "gl_account_balances",
        "gl_accounts",
        "gl_fiscal_periods",
        "gl_fiscal_years",
    ),
    _q(
        "Journal entries posted by each user last month, with their total debits",
        "gl_journal_entries",
        "gl_journal_lines",
        "core_users",
    ),
    _q(
        "Budget versus actual spend by cost center for 2025",
        "gl_budget_lines",
        "gl_budgets",
        "gl_journal_lines",
        "gl_cost_centers",
    ),
    _q(
        "Bank statement lines that are still unreconciled, per bank account",
        "cm_bank_statement_lines",
        "cm_bank_statements",
        "cm_bank_accounts",
    ),
    _q(
        "Revenue in euros: convert each invoice total with the exchange rate on the invoice date",
        "ar_invoices",
        "ref_exchange_rates",
        "ref_currencies",
    ),
    _q("Headcount per department", "hr_employees", "hr_departments"),
    _q(
        "Average salary by job grade",
        "hr_employees",
        "hr_job_positions",
        "hr_job_grades",
        "hr_salary_history",
    ),
    _q("Employees who joined in 2025 and their managers", "hr_employees"),
    _q("Who has the most remaining leave days this year?", "hr_leave_balances", "hr_employees"),
    _q("Total gross pay and net pay per payroll run in 2025", "pay_payroll_runs", "pay_payslips"),
    _q("Which employees received a bonus larger than 5000?", "pay_bonuses", "hr_employees"),
    _q(
        "Overtime hours per employee from attendance records last month",
        "hr_attendance_records",
        "hr_employees",
    ),
    _q(
        "Expense reports waiting for approval and their totals by employee",
        "hr_expense_reports",
        "hr_employees",
    ),
    _q(
        "Training courses completed per employee with their scores",
        "hr_training_enrollments",
        "hr_training_courses",
        "hr_employees",
    ),
    _q(
        "Open opportunities by sales stage with expected amount",
        "crm_opportunities",
        "crm_sales_stages",
    ),
    _q(
        "Lead conversion: leads per lead source that became opportunities",
        "crm_leads",
        "crm_lead_sources",
        "crm_opportunities",
    ),
    _q("Support cases opened per customer and average time to close", "crm_cases", "crm_customers"),
    _q(
        "Net promoter score per industry from customer surveys",
        "crm_customer_surveys",
        "crm_customers",
        "ref_industries",
    ),
    _q(
        "Billable hours per project from time entries this quarter",
        "prj_time_entries",
        "prj_projects",
    ),
    _q(
        "Projects over budget: actual cost versus budget amount",
        "prj_projects",
        "prj_time_entries",
        "prj_expenses",
        "prj_budgets",
    ),
    _q(
        "Production orders that finished late, with the product made",
        "mfg_production_orders",
        "inv_items",
    ),
    _q(
        "Scrap cost per work center this year",
        "mfg_scrap_records",
        "mfg_production_orders",
        "mfg_production_order_operations",
        "mfg_work_centers",
    ),
    _q(
        "Machine downtime minutes per machine and reason",
        "mfg_machine_downtime",
        "mfg_machines",
        "ref_reason_codes",
    ),
    _q(
        "Components needed for the bill of materials of item A-100",
        "mfg_boms",
        "mfg_bom_lines",
        "inv_items",
    ),
    _q(
        "Net book value of fixed assets by asset category",
        "fa_assets",
        "fa_asset_categories",
        "fa_depreciation_schedules",
    ),
    _q(
        "Assets disposed of in 2025 and the gain or loss on each", "fa_asset_disposals", "fa_assets"
    ),
    _q(
        "Freight cost per carrier for shipments last month",
        "tms_freight_invoices",
        "tms_carriers",
        "sls_shipments",
    ),
    _q(
        "Warranty claims per item and the approved amounts",
        "svc_warranty_claims",
        "svc_installed_base",
        "inv_items",
    ),
    _q(
        "Tax due versus tax paid per jurisdiction for 2025 returns",
        "tax_returns",
        "ref_tax_jurisdictions",
    ),
]


LOOKUP_ROWS: dict[str, list[tuple[object, ...]]] = {
    "ref_currencies": [
        ("USD", "US Dollar", "$", 2),
        ("EUR", "Euro", "€", 2),
        ("GBP", "Pound Sterling", "£", 2),
        ("JPY", "Japanese Yen", "¥", 0),
        ("CAD", "Canadian Dollar", "$", 2),
        ("CHF", "Swiss Franc", "Fr", 2),
        ("INR", "Indian Rupee", "₹", 2),
    ],
    "ref_countries": [
        ("US", "United States", "USA", "North America", 1),
        ("DE", "Germany", "DEU", "Europe", 2),
        ("GB", "United Kingdom", "GBR", "Europe", 3),
        ("JP", "Japan", "JPN", "Asia", 4),
        ("CA", "Canada", "CAN", "North America", 5),
        ("FR", "France", "FRA", "Europe", 2),
        ("CH", "Switzerland", "CHE", "Europe", 6),
        ("IN", "India", "IND", "Asia", 7),
    ],
    "ref_units_of_measure": [
        ("EA", "Each", "count"),
        ("BOX", "Box", "count"),
        ("KG", "Kilogram", "weight"),
        ("G", "Gram", "weight"),
        ("L", "Litre", "volume"),
        ("M", "Metre", "length"),
        ("H", "Hour", "time"),
    ],
    "ref_payment_terms": [
        ("NET30", "Net 30 days", 30, 0, 0.0),
        ("NET60", "Net 60 days", 60, 0, 0.0),
        ("2/10N30", "2% 10, net 30", 30, 10, 2.0),
        ("COD", "Cash on delivery", 0, 0, 0.0),
        ("EOM", "End of month", 30, 0, 0.0),
    ],
    "ref_payment_methods": [
        ("WIRE", "Wire transfer", 1),
        ("ACH", "ACH transfer", 1),
        ("CHECK", "Cheque", 0),
        ("CARD", "Credit card", 1),
        ("CASH", "Cash", 0),
    ],
    "ref_status_codes": [
        ("sales_order", "open", "Open", 0),
        ("sales_order", "shipped", "Shipped", 0),
        ("sales_order", "closed", "Closed", 1),
        ("invoice", "open", "Open", 0),
        ("invoice", "paid", "Paid", 1),
        ("invoice", "cancelled", "Cancelled", 1),
    ],
    "ref_languages": [("en", "English"), ("de", "German"), ("fr", "French"), ("ja", "Japanese")],
}

STATUSES = ("draft", "open", "approved", "in_progress", "closed", "cancelled")
#: Values for coded columns, so distinct-value samples read like a real system's.
VOCABULARY: dict[str, tuple[str, ...]] = {
    "gender": ("female", "male", "undisclosed"),
    "employment_type": ("full_time", "part_time", "contractor", "intern"),
    "customer_segment": ("Enterprise", "Mid-market", "Small Business", "Public Sector"),
    "priority": ("low", "medium", "high", "urgent"),
    "severity": ("minor", "major", "critical"),
    "move_type": ("receipt", "issue", "transfer", "adjustment", "return"),
    "item_type": ("finished_good", "raw_material", "service", "spare_part"),
    "address_type": ("billing", "shipping", "head_office"),
    "journal_type": ("sales", "purchases", "cash", "general"),
    "contract_type": ("permanent", "fixed_term", "temporary"),
    "frequency": ("weekly", "monthly", "quarterly", "yearly"),
    "pay_frequency": ("weekly", "biweekly", "monthly"),
    "tier": ("bronze", "silver", "gold", "platinum"),
    "result": ("passed", "failed", "conditional"),
    "decision": ("approved", "rejected", "escalated"),
    "stage": ("screening", "interview", "offer", "hired", "rejected"),
    "channel": ("email", "web", "phone", "partner"),
}
ORGANISATIONS = (
    "Northwind Traders",
    "Contoso Ltd",
    "Fabrikam Inc",
    "Adatum Corp",
    "Litware Inc",
    "Tailspin Toys",
    "Wingtip Supply",
    "Proseware GmbH",
    "Lucerne Publishing",
    "Woodgrove Bank",
    "Alpine Ski House",
    "Coho Winery",
)
FIRST_NAMES = (
    "Ada",
    "Grace",
    "Linus",
    "Barbara",
    "Wei",
    "Priya",
    "Mateo",
    "Sofia",
    "Hiroshi",
    "Fatima",
    "Omar",
    "Chloe",
)
LAST_NAMES = (
    "Lovelace",
    "Hopper",
    "Torvalds",
    "Liskov",
    "Chen",
    "Patel",
    "Garcia",
    "Rossi",
    "Tanaka",
    "Khan",
    "Novak",
)
FIRST_DAY = dt.date(2024, 1, 1)
ROWS_PER_TABLE = (4, 8)
_PREFIXES = frozenset(ERP_MODULES)


@dataclass(frozen=True)
class ErpColumn:
    name: str
    type: str
    references: str | None = None


@dataclass(frozen=True)
class ErpTable:
    name: str
    primary_key: str
    columns: tuple[ErpColumn, ...]


def _singular(word: str) -> str:
    for plural, single in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("xes", "x"),
        ("s", ""),
    ):
        if word.endswith(plural) and not word.endswith(("ss", "us", "is")):
            return word[: -len(plural)] + single
    return word


def _default_key(table: str) -> str:
    words = table.split("_")
    if words[0] in _PREFIXES:
        words = words[1:]
    return "_".join(words[:-1] + [_singular(words[-1])]) + "_id"


_TYPE_RULES: tuple[tuple[str, str], ...] = (
    (r"(^|_)(date)$|_date$", "DATE"),
    (r"_at$", "TIMESTAMP"),
    (r"^(is|has)_", "BOOLEAN"),
    (r"(_time)$", "VARCHAR(8)"),
    (
        r"_(code|type|method|frequency)$|^(gender|tier|channel|stage|decision|result|severity|priority)$",
        "VARCHAR(20)",
    ),
    (r"(_number|_no|^iban|^barcode|reference)$", "VARCHAR(34)"),
    (r"(^|_)(name|title|subject|email)$", "VARCHAR(120)"),
    (r"(^status|_status)$", "VARCHAR(20)"),
    (
        r"(amount|price|cost|balance|salary|total|limit|rate|value|fee|budget|depreciation)(_|$)",
        "NUMERIC(14, 2)",
    ),
    (
        r"(quantity|hours|days|percent|minutes|kg|cm|km|factor|score|complete|per_day|per_unit|unit)$|_change$|^days_"
        r"|^hours_",
        "NUMERIC(12, 3)",
    ),
    (
        r"(description|notes|comments?|comment_text|feedback|reason|summary|message|address_line\d|plan)$",
        "VARCHAR(400)",
    ),
)


def _column_type(name: str) -> str:
    for pattern, type_ in _TYPE_RULES:
        if re.search(pattern, name):
            return type_
    return "VARCHAR(60)"


def erp_tables() -> list[ErpTable]:
    """The ERP schema as data: every table, its key and columns, in creation order."""
    heads = []
    for line in re.sub(r"\n\s+", " ", SPEC.strip()).splitlines():
        head, _, body = line.partition(": ")
        name, _, key = head.partition("(")
        heads.append((name, key.rstrip(")") or _default_key(name), body))
    keys = {name: key for name, key, _ in heads}
    tables = []
    for name, key, body in heads:
        columns = [ErpColumn(key, "INTEGER")]
        for item in (part.strip() for part in re.split(r",\s*(?![^()]*\))", body)):
            column, _, referenced = item.partition(">")
            column, _, declared = column.partition(":")
            if referenced:
                columns.append(ErpColumn(column or keys[referenced], "INTEGER", referenced))
            else:
                columns.append(ErpColumn(column, declared or _column_type(column)))
        if not name.startswith("ref_"):
            columns += [ErpColumn("created_at", "TIMESTAMP"), ErpColumn("updated_at", "TIMESTAMP")]
        tables.append(ErpTable(name, key, tuple(columns)))
    return tables


def _ddl(table: ErpTable, keys: dict[str, str]) -> str:
    lines = []
    for col in table.columns:
        text = f"    {col.name} {col.type}"
        if col.name == table.primary_key:
            text += " PRIMARY KEY"
        elif col.references in keys:  # a reference to a table left out stays a plain column
            text += f" REFERENCES {col.references} ({keys[col.references]})"
        lines.append(text)
    return f"CREATE TABLE {table.name} (\n" + ",\n".join(lines) + "\n)"


def build_erp_database(path: str | os.PathLike[str], seed: int = 11, tables: int = 300) -> Path:
    """Write the first ``tables`` ERP tables with a few rows each to ``path`` (atomically).

    The same ``seed`` and ``tables`` give a byte-identical file; the file appears only once complete.
    """
    chosen = erp_tables()
    if not 1 <= tables <= len(chosen):
        raise ValueError(f"tables must be between 1 and {len(chosen)}, not {tables}")
    chosen = chosen[:tables]
    keys = {t.name: t.primary_key for t in chosen}

    def fill(con: sqlite3.Connection) -> None:
        for table in chosen:
            con.execute(_ddl(table, keys))
        con.execute("BEGIN")
        _populate(con, chosen, random.Random(seed))
        con.execute("COMMIT")

    return write_sqlite_atomically(path, fill, what="ERP database")


def _populate(con: sqlite3.Connection, tables: list[ErpTable], rng: random.Random) -> None:
    counts = {
        t.name: len(LOOKUP_ROWS.get(t.name, ())) or rng.randint(*ROWS_PER_TABLE) for t in tables
    }
    for table in tables:
        rows = []
        fixed = LOOKUP_ROWS.get(table.name)
        for row_id in range(1, counts[table.name] + 1):
            if fixed is not None:
                values: list[object] = [row_id, *fixed[row_id - 1]]
            else:
                values = [row_id] + [
                    _value(table, col, row_id, counts, rng) for col in table.columns[1:]
                ]
            rows.append(values)
        marks = ", ".join("?" * len(table.columns))
        con.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows)


def _value(
    table: ErpTable, col: ErpColumn, row_id: int, counts: dict[str, int], rng: random.Random
) -> object:
    name, type_ = col.name, col.type
    if col.references is not None:
        if col.references == table.name:  # hierarchies: the first row is a root
            return rng.randint(1, row_id - 1) if row_id > 1 else None
        if col.references not in counts:
            return rng.randint(1, 5)
        return rng.randint(1, counts[col.references])
    day = FIRST_DAY + dt.timedelta(days=rng.randint(0, 729))
    if type_ == "DATE":
        return day.isoformat()
    if type_ == "TIMESTAMP":
        return f"{day.isoformat()} {rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}:00"
    if type_ == "BOOLEAN":
        return int(rng.random() < 0.7)
    if type_ == "INTEGER":
        if name.endswith("year"):
            return rng.choice((2024, 2025))
        if name.endswith(("month", "period_number")):
            return rng.randint(1, 12)
        if name.endswith("quarter"):
            return rng.randint(1, 4)
        return rng.randint(1, 10)
    if type_.startswith("NUMERIC"):
        if "(18, 6)" in type_ or name == "multiplier":
            return round(rng.uniform(0.5, 2.0), 6 if "(18" in type_ else 2)
        if type_.startswith("NUMERIC(7"):
            return rng.choice((0.0, 0.05, 0.07, 0.19, 0.2))
        if name.endswith("percent"):
            return float(rng.choice((0, 5, 10, 15, 25, 50)))
        if type_.startswith("NUMERIC(12"):
            return float(rng.randint(1, 120))
        return round(rng.uniform(10, 25_000), 2)
    if name in VOCABULARY:
        return rng.choice(VOCABULARY[name])
    if name in ("status", "response_status") or name.endswith("_status"):
        return rng.choice(STATUSES)
    if name == "first_name" or name.endswith("contact_name"):
        return rng.choice(FIRST_NAMES) + (
            "" if name == "first_name" else " " + rng.choice(LAST_NAMES)
        )
    if name == "last_name":
        return rng.choice(LAST_NAMES)
    if name in (
        "legal_name",
        "company_name",
        "insurer_name",
        "carrier_name",
        "provider_name",
        "merchant_name",
    ) or (
        name == "name"
        and table.name in ("crm_customers", "pur_suppliers", "crm_competitors", "core_companies")
    ):
        return rng.choice(ORGANISATIONS)
    if name == "email":
        return f"{rng.choice(FIRST_NAMES).lower()}.{row_id}@example.com"
    if name == "phone":
        return f"+1-555-{rng.randint(1000, 9999)}"
    if name == "city":
        return rng.choice(
            ("Boston", "Berlin", "London", "Osaka", "Toronto", "Lyon", "Zurich", "Pune")
        )
    label = _default_key(table.name)[:-3].replace("_", " ").title()
    if type_ == "VARCHAR(20)":
        return f"{name.split('_')[0][:3].upper()}{rng.randint(1, 4)}"
    if type_ == "VARCHAR(34)":
        return f"{label[:3].upper()}-{row_id:05d}"
    return f"{label} {row_id}"
