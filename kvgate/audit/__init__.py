"""The timing side-channel audit: can one tenant tell, from time to first token, whether another
tenant's prompt is cached? (Two-sample Kolmogorov-Smirnov test, with a same-tenant positive control.)"""
