__author__ = 'tusharmakkar08'
