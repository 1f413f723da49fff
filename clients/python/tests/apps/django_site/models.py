"""The business tables, which the tests create with SQL."""

from django.db import models


class Payment(models.Model):
    """A payment; the HTTP tests count them by key."""
    key = models.TextField()
    amount = models.DecimalField(max_digits=20, decimal_places=2)
    app = models.TextField(default="django")

    class Meta:
        """The table exists already (tests/conftest.py creates it)."""
        managed = False
        db_table = "payments"


class Shipment(models.Model):
    """A shipment sent downstream with a minted key."""
    key = models.TextField()
    downstream_key = models.TextField()
    app = models.TextField(default="django")

    class Meta:
        """The table exists already (tests/conftest.py creates it)."""
        managed = False
        db_table = "shipments"
